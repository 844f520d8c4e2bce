package lab

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseProxy(t *testing.T) {
	p, err := ParseProxy("http+pp2+last")
	require.NoError(t, err)
	assert.Equal(t, Proxy{Mode: "http", PP2: true, Last: true}, p)
	assert.Equal(t, []string{"--proxy-protocol", "--proxy-from", "127.0.0.1/32"}, p.ServerFlags())
	p, err = ParseProxy("http")
	require.NoError(t, err)
	assert.Nil(t, p.ServerFlags())
	for _, bad := range []string{"", "udp", "http+pp3", "http+pp2+pp2", "tcp+last", "tcp+pp2+never", "pp2+http"} {
		_, err := ParseProxy(bad)
		assert.Error(t, err, bad)
	}
}

func TestHAProxyConfig(t *testing.T) {
	c := HAProxyConfig{Proxy: Proxy{Mode: "http", PP2: true, Never: true}, Socket: "/w/hap.sock",
		Front: "127.0.0.1:21750", Source: "127.0.0.1", Servers: []string{"127.0.0.1:21751", "127.0.0.1:21752"}}
	cfg := c.Render()
	for _, want := range []string{"\n    mode http\n", "\n    bind 127.0.0.1:21750\n", "\n    http-reuse never\n",
		"\n    default-server send-proxy-v2\n", "\n    server s0 127.0.0.1:21751\n", "\n    server s1 127.0.0.1:21752\n",
		"stats socket /w/hap.sock mode 600 level admin", "retry-on conn-failure"} {
		assert.Contains(t, cfg, want)
	}
	assert.NotContains(t, cfg, "prefer-last-server")
	assert.NotContains(t, cfg, "\n\n", "no blank lines left by the template")

	c.Proxy = Proxy{Mode: "tcp"}
	cfg = c.Render()
	assert.Contains(t, cfg, "\n    mode tcp\n")
	for _, not := range []string{"send-proxy", "retry-on", "http-reuse", "prefer-last-server"} {
		assert.NotContains(t, cfg, not)
	}
	c.Proxy = Proxy{Mode: "http", Last: true}
	assert.Contains(t, c.Render(), "\n    option prefer-last-server\n")
}

func TestProxyStat(t *testing.T) {
	csv := strings.Join([]string{
		"# pxname,svname,qcur,status,connect,reuse,",
		"web,FRONTEND,0,OPEN,,,",
		"twinloop,s0,0,UP,12,3400,",
		"twinloop,s1,0,UP,10,3000,",
		"twinloop,BACKEND,0,UP,22,6400,",
		"",
	}, "\n")
	m, err := ProxyStat(csv, "twinloop", "connect", "reuse")
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"connect": 22, "reuse": 6400}, m)
	_, err = ProxyStat(csv, "twinloop", "nosuch")
	assert.Error(t, err)
	_, err = ProxyStat("oops", "twinloop", "connect")
	assert.Error(t, err)
}

func TestParseStepsProxy(t *testing.T) {
	p, err := ParseSteps(strings.NewReader("instances 2\na|epoll|1|0|proxy:tcp+pp2|1500|-v|x|32\n"))
	require.NoError(t, err)
	assert.Equal(t, 2, p.Instances)
	require.NotNil(t, p.Steps[0].Proxy)
	assert.Equal(t, Proxy{Mode: "tcp", PP2: true}, *p.Steps[0].Proxy)
	p, err = ParseSteps(strings.NewReader("a|epoll|1|0|keepalive|1500||x\n"))
	require.NoError(t, err)
	assert.Equal(t, 3, p.Instances)
	assert.Nil(t, p.Steps[0].Proxy)
	for _, bad := range []string{
		"a|nginx|1|0|proxy:http|1500||x\n",
		"a|epoll|1|0|proxy:http+x|1500||x\n",
		"instances 0\na|epoll|1|0|proxy:http|1500||x\n",
		"netns s c\na|epoll|1|0|proxy:http|1500||x\n",
	} {
		_, err := ParseSteps(strings.NewReader(bad))
		assert.Error(t, err, bad)
	}
}
