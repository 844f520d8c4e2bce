package deploy

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOpsTLSEdge runs haproxy-tls.cfg as it is: HAProxy terminates TLS
// (ALPN h2 and http/1.1) with a certificate made here, and forwards to the
// twinloop binary with send-proxy-v2, on each event-loop backend (epoll,
// io_uring, poll; blocking runs no CGI, which this checks). curl,
// over HTTP/1.1 and over HTTP/2, must get the exact bytes of a small and a
// 1 MiB file and of a range of it (206), and twinloop must see the
// client: curl connects from 127.0.0.2 while HAProxy connects to twinloop
// from 127.0.0.1, so the access log's address is the PROXY header's, and a
// CGI script's REMOTE_ADDR and REMOTE_PORT are curl's own address and
// port. Ports 21700-21799 on 127.0.0.1.
func TestOpsTLSEdge(t *testing.T) {
	opsOnly(t, "haproxy", "curl")
	if out, _ := exec.Command("curl", "-V").Output(); !bytes.Contains(out, []byte("HTTP2")) {
		t.Skip("this curl has no HTTP/2 (nghttp2)")
	}
	dir := t.TempDir()
	server := filepath.Join(dir, "server")
	build := exec.Command("go", "build", "-o", server, "../cmd/server")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/server:\n%s", out)

	cert := makeCert(t, dir)
	www := filepath.Join(dir, "www")
	cgi := filepath.Join(dir, "cgi")
	require.NoError(t, os.MkdirAll(www, 0o755))
	require.NoError(t, os.MkdirAll(cgi, 0o755))
	small := []byte("<!doctype html><title>twinloop</title><p>behind TLS</p>\n")
	large := make([]byte, 1<<20)
	_, err = rand.Read(large)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(www, "small.html"), small, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(www, "large.bin"), large, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cgi, "addr"),
		[]byte("#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n%s %s' \"$REMOTE_ADDR\" \"$REMOTE_PORT\"\n"), 0o755))

	for i, backend := range []string{"epoll", "uring", "poll"} {
		t.Run(backend, func(t *testing.T) {
			front := 21700 + 10*i
			addr := fmt.Sprintf("127.0.0.1:%d", front+1)
			metrics := front + 2
			for _, p := range []int{front, front + 1, metrics} {
				requirePortFree(t, p)
			}
			accessLog := startTwinloop(t, server, "--backend="+backend, "--listen", addr,
				"--dir", www, "--cgi-dir", cgi, "--loops", "1", "-v",
				"--metrics", fmt.Sprintf("127.0.0.1:%d", metrics),
				"--proxy-protocol", "--proxy-from", "127.0.0.1/32")
			startHAProxy(t, "haproxy-tls.cfg",
				"TLS_BIND=127.0.0.1:"+strconv.Itoa(front), "TLS_CERT="+cert,
				"TWINLOOP_ADDR="+addr, "TWINLOOP_CHECK_PORT="+strconv.Itoa(metrics))
			base := fmt.Sprintf("https://127.0.0.1:%d", front)
			// HAProxy listens before its first check has passed: the
			// first answer may be a 503.
			for deadline := time.Now().Add(10 * time.Second); ; {
				out, err := exec.Command("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "2",
					"--cacert", cert, base+"/small.html").Output()
				if err == nil && string(out) == "200" {
					break
				}
				require.True(t, time.Now().Before(deadline), "no 200 through HAProxy in 10 s: %q %v", out, err)
				time.Sleep(100 * time.Millisecond)
			}

			for _, proto := range []string{"--http1.1", "--http2"} {
				version := map[string]string{"--http1.1": "1.1", "--http2": "2"}[proto]
				ua := func(name string) string { return "tls-test/" + backend + "/" + version + "/" + name }

				r := curlTLS(t, cert, proto, base+"/small.html", ua("small"))
				require.Equal(t, 200, r.code)
				require.Equal(t, version, r.version, "ALPN")
				require.Equal(t, small, r.body)

				r = curlTLS(t, cert, proto, base+"/large.bin", ua("large"))
				require.Equal(t, 200, r.code)
				require.Equal(t, version, r.version)
				require.True(t, bytes.Equal(large, r.body), "1 MiB body: %d bytes, not the file's", len(r.body))

				r = curlTLS(t, cert, proto, base+"/large.bin", ua("range"), "--range", "1000-70999")
				require.Equal(t, 206, r.code)
				require.True(t, bytes.Equal(large[1000:71000], r.body), "range: %d bytes, not the file's", len(r.body))
				require.Regexp(t, `(?im)^content-range: bytes 1000-70999/1048576\r?$`, r.head)

				r = curlTLS(t, cert, proto, base+"/cgi-bin/addr", ua("addr"))
				require.Equal(t, 200, r.code)
				require.Equal(t, r.local, string(r.body), "CGI's REMOTE_ADDR and REMOTE_PORT are curl's address and port")

				// The access log is written off the loops, once a second.
				for _, want := range []string{
					`"GET /small.html HTTP/1.1" 200 ` + strconv.Itoa(len(small)) + ` "-" "` + ua("small") + `"`,
					`"GET /large.bin HTTP/1.1" 200 1048576 "-" "` + ua("large") + `"`,
					`"GET /large.bin HTTP/1.1" 206 70000 "-" "` + ua("range") + `"`,
				} {
					line := regexp.MustCompile(`(?m)^127\.0\.0\.2 - - \[[^]]+\] ` + regexp.QuoteMeta(want) + `$`)
					require.Eventually(t, func() bool { return line.MatchString(accessLog.String()) },
						5*time.Second, 50*time.Millisecond, "no access log line from 127.0.0.2 with %s:\n%s", want, accessLog)
				}
				t.Logf("%s: HTTP/%s small, 1 MiB and range exact; client 127.0.0.2 in the access log; CGI saw %s",
					backend, version, r.body)
			}

			// Keep-alive end to end: 8 clients at once, each 25 requests
			// on one connection, cost twinloop 8 connections, not one per
			// request (http-reuse never; results/cluster/README.md).
			const clients, each = 8, 25
			a0, q0 := twinloopCounters(t, metrics)
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			for range clients {
				wg.Go(func() {
					args := []string{"-sS", "--max-time", "20", "--http1.1", "--cacert", cert, "-o", "/dev/null"}
					for range each {
						args = append(args, base+"/small.html", "-o", "/dev/null")
					}
					if out, err := exec.Command("curl", args[:len(args)-2]...).CombinedOutput(); err != nil {
						errs <- fmt.Errorf("curl: %v: %s", err, out)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			var a1, q1 int
			require.Eventually(t, func() bool {
				a1, q1 = twinloopCounters(t, metrics)
				return q1-q0 >= clients*each
			}, 5*time.Second, 100*time.Millisecond, "twinloop counted %d of %d requests", q1-q0, clients*each)
			require.LessOrEqual(t, a1-a0, clients, "%d connections to twinloop for %d clients' %d requests", a1-a0, clients, q1-q0)
			t.Logf("%s: %d clients, %d requests on keep-alive: %d connections to twinloop", backend, clients, q1-q0, a1-a0)
		})
	}
}

// twinloopCounters reads the accepted connections and the requests
// answered from twinloop's --metrics (published once a second).
func twinloopCounters(t *testing.T, port int) (accepts, requests int) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return -1, -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		n, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "twinloop_accepts_total{"):
			accepts += int(n)
		case strings.HasPrefix(line, "twinloop_requests_total{"):
			requests += int(n)
		}
	}
	return accepts, requests
}

// opsOnly skips a test unless make test-ops runs it (TWINLOOP_OPS=1) and
// the programs it needs are installed.
func opsOnly(t *testing.T, need ...string) {
	t.Helper()
	if os.Getenv("TWINLOOP_OPS") != "1" {
		t.Skip("an operations test: run make test-ops (or TWINLOOP_OPS=1 go test ./deploy/)")
	}
	for _, bin := range need {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed: make test-ops installs it (apt-get)", bin)
		}
	}
}

// makeCert writes a self-signed certificate for 127.0.0.1, valid for an
// hour, and its key, as a Kubernetes TLS Secret mounts them
// (kubernetes/twinloop-tls.yaml): site.pem, for HAProxy's crt and curl's
// --cacert, and site.pem.key beside it, which HAProxy loads with it.
func makeCert(t *testing.T, dir string) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	cert := filepath.Join(dir, "site.pem")
	require.NoError(t, os.WriteFile(cert, certPEM, 0o644))
	require.NoError(t, os.WriteFile(cert+".key", keyPEM, 0o600))
	return cert
}

func requirePortFree(t *testing.T, port int) {
	t.Helper()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err, "port %d is in use", port)
	require.NoError(t, ln.Close())
}

// syncBuffer collects a process's output while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startTwinloop starts the server and waits until its --listen address
// accepts; its stdout (the access log with -v) is returned. A backend
// that cannot run here skips the test. SIGTERM stops it at the end.
func startTwinloop(t *testing.T, server string, args ...string) *syncBuffer {
	t.Helper()
	var stdout, stderr syncBuffer
	cmd := exec.Command(server, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	var listen string
	for i, a := range args {
		if a == "--listen" {
			listen = args[i+1]
		}
	}
	waitListening(t, listen, exited, &stderr)
	return &stdout
}

// startHAProxy runs haproxy in the foreground (-db) on a config file of
// this folder, its environment added to ours, until the test ends, and
// waits until its TLS_BIND address accepts.
func startHAProxy(t *testing.T, config string, env ...string) {
	t.Helper()
	check := exec.Command("haproxy", "-c", "-q", "-f", config)
	check.Env = append(os.Environ(), env...)
	out, err := check.CombinedOutput()
	require.NoError(t, err, "haproxy -c %s:\n%s", config, out)
	var stderr syncBuffer
	cmd := exec.Command("haproxy", "-db", "-f", config)
	cmd.Env = check.Env
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	// A session of its own: a stopping HAProxy signals its process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGUSR1) // soft stop
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	var bind string
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "TLS_BIND="); ok {
			bind = v
		}
	}
	waitListening(t, bind, exited, &stderr)
}

// waitListening polls addr until it accepts a connection, the process
// exits (a backend that cannot run here skips the test) or 20 s pass.
func waitListening(t *testing.T, addr string, exited chan error, stderr *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			require.NoError(t, c.Close())
			return
		}
		select {
		case err := <-exited:
			exited <- err // for the cleanup's wait
			if strings.Contains(stderr.String(), "cannot run here") {
				t.Skipf("%s", strings.TrimSpace(stderr.String()))
			}
			t.Fatalf("exited (%v) before it listened on %s:\n%s", err, addr, stderr)
		case <-time.After(50 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "nothing listens on %s after 20 s:\n%s", addr, stderr)
	}
}

type curlResult struct {
	code    int
	version string // HTTP version: 1.1 or 2
	local   string // curl's address and port: "127.0.0.2 41234"
	head    string
	body    []byte
}

// curlTLS fetches url with curl from 127.0.0.2, trusting only cert.
func curlTLS(t *testing.T, cert, proto, url, userAgent string, extra ...string) curlResult {
	t.Helper()
	dir := t.TempDir()
	bodyFile, headFile := filepath.Join(dir, "body"), filepath.Join(dir, "head")
	args := append([]string{"-sS", "--max-time", "10", proto, "--cacert", cert, "--interface", "127.0.0.2",
		"-A", userAgent, "-o", bodyFile, "-D", headFile,
		"-w", "%{http_code} %{http_version} %{local_ip} %{local_port}"}, extra...)
	out, err := exec.Command("curl", append(args, url)...).CombinedOutput()
	require.NoError(t, err, "curl %s %s: %s", proto, url, out)
	f := strings.Fields(string(out))
	require.Len(t, f, 4, "curl -w: %q", out)
	var r curlResult
	r.code, err = strconv.Atoi(f[0])
	require.NoError(t, err)
	r.version, r.local = f[1], f[2]+" "+f[3]
	head, err := os.ReadFile(headFile)
	require.NoError(t, err)
	r.head = string(head)
	r.body, err = os.ReadFile(bodyFile)
	require.NoError(t, err)
	return r
}
