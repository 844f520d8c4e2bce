package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twinloop/twinloop/scripts/lab"
)

// proxyCell runs a proxy:OPTS step once (was scripts/cluster-proxy.sh):
// the plan's instances twinloop servers of the step (each with the
// step's flags, and --proxy-protocol with +pp2) on ports of their own,
// HAProxy in front of them (lab.HAProxyConfig, on the step's CPUs too),
// the warm-up, the quiet gate and the measured run aimed at HAProxy. The
// meter counts the instances' and HAProxy's CPU; beside wrk's figures
// the row has, per 1000 requests, the connections the instances accepted
// (their exit lines) and HAProxy's server connections opened and reused
// over the measured run (show stat on its admin socket).
func (r *runner) proxyCell(ctx context.Context, s lab.Step, round, slot int) ([]string, string, error) {
	px := *s.Proxy
	inst := s
	inst.Flags = append(slices.Clone(s.Flags), px.ServerFlags()...)
	var svs []*server
	defer func() {
		for _, sv := range svs {
			sv.stop()
		}
	}()
	cfg := lab.HAProxyConfig{Proxy: px, Source: r.plan.Host}
	var pids []int
	for i := 0; i < r.plan.Instances; i++ {
		sv, err := r.startServer(inst)
		if err != nil {
			return nil, "", fmt.Errorf("instance %d: %w", i, err)
		}
		svs = append(svs, sv)
		pids = append(pids, sv.pids...)
		cfg.Servers = append(cfg.Servers, fmt.Sprintf("%s:%d", r.plan.Host, sv.port))
	}
	hp, err := r.startHAProxy(s, cfg)
	if err != nil {
		return nil, "", err
	}
	defer hp.stop()
	pids = append(pids, hp.pid())
	path, _ := lab.URLPath(s.Size)
	if r.warmup > 0 {
		if _, _, _, err := r.wrk(ctx, s, hp.port, path, r.warmup); err != nil {
			return nil, "", fmt.Errorf("warm-up: %w", err)
		}
	}
	quiesce(pids)
	var waited time.Duration
	if r.quiet {
		waited = quietWait(ctx, r.quietMax)
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
	}
	st0, err := hp.stat()
	if err != nil {
		return nil, "", err
	}
	m, err := startMeter(pids)
	if err != nil {
		return nil, "", err
	}
	rep, client, _, err := r.wrk(ctx, s, hp.port, path, r.duration)
	if err != nil {
		return nil, "", err
	}
	st1, err := hp.stat()
	if err != nil {
		return nil, "", err
	}
	quiesce(pids)
	set, err := m.stop(rep.Requests, client)
	if err != nil {
		return nil, "", err
	}
	rss := peakRSSKB(pids)
	hp.stop()
	var acc, req, sys int64
	for _, sv := range svs {
		sv.stop()
		c := exitFields(sv.log)
		acc, req, sys = acc+c["accepts"], req+c["requests"], sys+c["syscalls"]
	}
	perK := func(n, d int64) string {
		if d == 0 {
			return ""
		}
		return fmt.Sprintf("%.3f", 1000*float64(n)/float64(d))
	}
	conn, reuse := perK(st1["connect"]-st0["connect"], rep.Requests), perK(st1["reuse"]-st0["reuse"], rep.Requests)
	accK := perK(acc, req)
	set = append(set, "step="+s.ID, "label="+s.Label, "kind="+s.Kind, fmt.Sprintf("conns=%d", s.Conns),
		"mode="+s.Mode, "size="+s.Size, fmt.Sprintf("round=%d", round), fmt.Sprintf("slot=%d", slot),
		fmt.Sprintf("seed=%d", r.seed), fmt.Sprintf("peak_rss_kb=%d", rss),
		fmt.Sprintf("duration_s=%g", r.duration.Seconds()),
		"server_accepts_per_kreq="+accK, "proxy_connects_per_kreq="+conn, "proxy_reuses_per_kreq="+reuse)
	if req > 0 {
		set = append(set, fmt.Sprintf("syscalls_per_req=%.3f", float64(sys)/float64(req)))
	}
	if r.quiet {
		set = append(set, fmt.Sprintf("quiet_wait_s=%.1f", waited.Seconds()))
	}
	row, err := lab.Row(lab.Rounds, &rep, set)
	if err != nil {
		return nil, "", err
	}
	return row, fmt.Sprintf("%.0f req/s through HAProxy; per 1000 requests: %s accepts by the %d instances (%d in all), HAProxy %s connects, %s reuses",
		rep.RPS, orDash(accK), len(svs), acc, orDash(conn), orDash(reuse)), nil
}

// exitFields are the numbers of twinloop's exit line ("server: stopped;
// requests=N ... accepts=N ..."), by name; empty when it is missing.
func exitFields(log string) map[string]int64 {
	m := map[string]int64{}
	f, err := os.Open(log)
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "server: stopped; ")
		if !ok {
			continue
		}
		for _, kv := range strings.Fields(rest) {
			k, v, _ := strings.Cut(kv, "=")
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				m[k] = n
			}
		}
	}
	return m
}

// haproxy is a proxy cell's HAProxy.
type haproxy struct {
	cmd  *exec.Cmd
	done chan struct{}
	port int
	sock string
	log  string
}

// startHAProxy writes cfg (its front on the next free port, its admin
// socket in the work folder), checks it (haproxy -c), starts HAProxy on
// the step's CPUs in the foreground (-db) and waits until it listens.
func (r *runner) startHAProxy(s lab.Step, cfg lab.HAProxyConfig) (*haproxy, error) {
	port, err := r.nextPort()
	if err != nil {
		return nil, err
	}
	cfg.Front = fmt.Sprintf("%s:%d", r.plan.Host, port)
	cfg.Socket = filepath.Join(r.work, fmt.Sprintf("haproxy-%d.sock", port))
	path := filepath.Join(r.work, fmt.Sprintf("haproxy-%d.cfg", port))
	if err := os.WriteFile(path, []byte(cfg.Render()), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.Command("haproxy", "-c", "-q", "-f", path).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("haproxy -c %s: %v: %s", path, err, strings.TrimSpace(string(out)))
	}
	hp := &haproxy{port: port, sock: cfg.Socket, log: filepath.Join(r.work, fmt.Sprintf("haproxy-%d.log", port)), done: make(chan struct{})}
	lf, err := os.Create(hp.log)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	hp.cmd = exec.Command("taskset", "-c", r.place[s.ID].Server, "haproxy", "-db", "-f", path)
	hp.cmd.Stdout, hp.cmd.Stderr = lf, lf
	if err := hp.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { hp.cmd.Wait(); close(hp.done) }()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-hp.done:
			out, _ := os.ReadFile(hp.log)
			return nil, fmt.Errorf("haproxy exited: %s", strings.TrimSpace(string(out)))
		default:
		}
		if dialIn("", cfg.Front) == nil {
			if _, err := hp.stat(); err == nil {
				return hp, nil
			}
		}
		if time.Now().After(end) {
			hp.stop()
			return nil, fmt.Errorf("haproxy did not listen on %s within 10 s", cfg.Front)
		}
	}
}

func (hp *haproxy) pid() int { return hp.cmd.Process.Pid }

// stat is show stat's connect and reuse summed over the servers.
func (hp *haproxy) stat() (map[string]int64, error) {
	c, err := net.DialTimeout("unix", hp.sock, time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "show stat\n"); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return nil, err
	}
	return lab.ProxyStat(string(b), "twinloop", "connect", "reuse")
}

// stop is HAProxy's soft stop (SIGUSR1), SIGKILL after 5 s.
func (hp *haproxy) stop() {
	select {
	case <-hp.done:
		return
	default:
	}
	hp.cmd.Process.Signal(syscall.SIGUSR1)
	select {
	case <-hp.done:
	case <-time.After(5 * time.Second):
		hp.cmd.Process.Kill()
		<-hp.done
	}
}
