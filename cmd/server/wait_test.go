package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/backend/uring"
	"github.com/twinloop/twinloop/internal/servertest"
)

// TestUringWaitLeavesOthersAP: io_uring's default wait (--uring-wait=batch)
// sleeps in a raw io_uring_enter that keeps the loop's P. With GOMAXPROCS 1
// and one loop, that is every P, so the goroutines of CGI scripts, the
// /metrics server and the signal handler run only when the loop lends its
// P (backend/uring/wait_linux.go, yield). Under steady static load on the
// same loop: CGI requests are answered, /metrics is answered, and SIGTERM
// stops the server with exit status 0.
func TestUringWaitLeavesOthersAP(t *testing.T) {
	if err := uring.New().Probe(); err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	for _, wait := range []string{"", "--uring-wait=raw"} {
		t.Run("default"+wait, func(t *testing.T) {
			dir, cgi := t.TempDir(), t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("hello\n"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(cgi, "hi"), []byte("#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'\necho \"hi $QUERY_STRING\"\n"), 0o755))
			addr, maddr := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)
			args := []string{"--backend=uring", "--loops", "1", "--listen", addr, "-d", dir, "--cgi-dir", cgi, "--metrics", maddr}
			if wait != "" {
				args = append(args, wait)
			}
			cmd, _, stderr := serverEnv(t, []string{"GOMAXPROCS=1"}, args...)
			servertest.WaitAccepting(t, addr)

			// Static keep-alive load on the one loop until the server stops.
			var served atomic.Int64
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, err := net.Dial("tcp", addr)
					if err != nil {
						return
					}
					defer c.Close()
					r := bufio.NewReader(c)
					for {
						if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
							return
						}
						resp, err := http.ReadResponse(r, nil)
						if err != nil {
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							return
						}
						served.Add(1)
					}
				}()
			}
			require.Eventually(t, func() bool { return served.Load() > 200 }, 10*time.Second, 5*time.Millisecond, "static load")

			client := &http.Client{Timeout: 10 * time.Second}
			for i := range 10 {
				resp, err := client.Get("http://" + addr + "/cgi-bin/hi?" + string(rune('a'+i)))
				require.NoError(t, err)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.Equal(t, 200, resp.StatusCode)
				assert.Equal(t, "hi "+string(rune('a'+i))+"\n", string(body))
			}
			for range 5 {
				resp, err := client.Get("http://" + maddr + "/metrics")
				require.NoError(t, err)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.Equal(t, 200, resp.StatusCode)
				assert.Contains(t, string(body), `twinloop_info{backend="uring"} 1`)
			}
			before := served.Load()
			require.Eventually(t, func() bool { return served.Load() > before+100 }, 10*time.Second, 5*time.Millisecond, "static load goes on beside CGI and scrapes")

			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				require.NoError(t, err, stderr.String())
			case <-time.After(10 * time.Second):
				t.Fatalf("SIGTERM under load: the server did not exit in 10 s; stderr:\n%s", stderr)
			}
			wg.Wait()
		})
	}
}
