package lab

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"text/template"
)

// Proxy is a proxy:OPTS step's HAProxy in front of the plan's instances
// twinloop servers (was scripts/cluster-proxy.sh, issue 38 item 9). OPTS
// is http or tcp (HAProxy's mode) and then, joined by +, any of
//
//	pp2    send-proxy-v2 to the servers, which run with --proxy-protocol
//	       --proxy-from 127.0.0.1/32
//	last   option prefer-last-server (mode http)
//	never  http-reuse never (mode http)
//
// so proxy:http is the cluster before PROXY v2, proxy:http+pp2 its recipe
// since, proxy:tcp+pp2 one server connection per client connection.
type Proxy struct {
	Mode             string // http or tcp
	PP2, Last, Never bool
}

// ParseProxy reads a proxy:OPTS mode's OPTS.
func ParseProxy(opts string) (Proxy, error) {
	f := strings.Split(opts, "+")
	p := Proxy{Mode: f[0]}
	if p.Mode != "http" && p.Mode != "tcp" {
		return p, fmt.Errorf("proxy:%s: want http or tcp first (proxy:http+pp2)", opts)
	}
	seen := map[string]bool{}
	for _, o := range f[1:] {
		if seen[o] {
			return p, fmt.Errorf("proxy:%s: %s twice", opts, o)
		}
		seen[o] = true
		switch o {
		case "pp2":
			p.PP2 = true
		case "last":
			p.Last = true
		case "never":
			p.Never = true
		default:
			return p, fmt.Errorf("proxy:%s: %q is not pp2, last or never", opts, o)
		}
	}
	if p.Mode == "tcp" && (p.Last || p.Never) {
		return p, fmt.Errorf("proxy:%s: last and never are mode http's", opts)
	}
	return p, nil
}

// ServerFlags are the flags each twinloop instance behind it gets.
func (p Proxy) ServerFlags() []string {
	if p.PP2 {
		return []string{"--proxy-protocol", "--proxy-from", "127.0.0.1/32"}
	}
	return nil
}

// HAProxyConfig is the data haproxy.cfg's template is rendered with.
type HAProxyConfig struct {
	Proxy
	Socket  string   // the admin socket (show stat)
	Front   string   // host:port HAProxy listens on, wrk's target
	Source  string   // the address HAProxy connects from
	Servers []string // host:port of each twinloop instance
}

// haproxyTmpl is scripts/cluster-proxy.sh's write_cfg (the cluster
// recipe's, scripts/cluster.sh) without its health checks: servers with
// no check are always up, and the checks went to the instances' --metrics
// port, so they never counted among the accepts measured here.
var haproxyTmpl = template.Must(template.New("haproxy.cfg").Parse(`# Written by scripts/labrun for one proxy:OPTS cell.
global
    maxconn 4096
    stats socket {{.Socket}} mode 600 level admin
defaults
    mode {{.Mode}}
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    retries 3
    option redispatch 1
{{- if eq .Mode "http"}}
    retry-on conn-failure empty-response response-timeout
{{- end}}
frontend web
    bind {{.Front}}
    default_backend twinloop
backend twinloop
    balance roundrobin
{{- if .Last}}
    option prefer-last-server
{{- end}}
{{- if .Never}}
    http-reuse never
{{- end}}
    source {{.Source}}
{{- if .PP2}}
    default-server send-proxy-v2
{{- end}}
{{- range $i, $s := .Servers}}
    server s{{$i}} {{$s}}
{{- end}}
`))

// Render is haproxy.cfg.
func (c HAProxyConfig) Render() string {
	var b bytes.Buffer
	if err := haproxyTmpl.Execute(&b, c); err != nil {
		panic(err) // the template and its data are the driver's
	}
	return b.String()
}

// ProxyStat sums fields of HAProxy's "show stat" CSV (the runtime API's
// answer) over the servers of backend be: connect and reuse, the server
// connections it opened and the requests it sent on one it had.
func ProxyStat(csv, be string, fields ...string) (map[string]int64, error) {
	lines := strings.Split(strings.TrimSpace(csv), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "# ") {
		return nil, fmt.Errorf("show stat: no header line")
	}
	head := strings.Split(strings.TrimPrefix(lines[0], "# "), ",")
	idx := map[string]int{}
	for _, f := range fields {
		i := slices.Index(head, f)
		if i < 0 {
			return nil, fmt.Errorf("show stat: no column %s", f)
		}
		idx[f] = i
	}
	out := map[string]int64{}
	for _, l := range lines[1:] {
		c := strings.Split(l, ",")
		if len(c) < len(head) || c[0] != be || c[1] == "BACKEND" || c[1] == "FRONTEND" {
			continue
		}
		for f, i := range idx {
			var v int64
			fmt.Sscan(c[i], &v)
			out[f] += v
		}
	}
	return out, nil
}
