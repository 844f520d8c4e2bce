package main

import (
	"bytes"
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// responder answers from prebuilt responses. date holds the current
// responses map (path → bytes), swapped once a second by OnTick so that
// the Date line stays true; loops only load it.
type responder struct {
	gnet.BuiltinEventEngine
	addr     string
	files    map[string][]byte // path → body
	resp     atomic.Pointer[map[string][]byte]
	notFound atomic.Pointer[[]byte]
}

func runGnet(addr, dir string, loops int) error {
	r := &responder{addr: "tcp://" + addr, files: map[string][]byte{}}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		r.files["/"+filepath.ToSlash(rel)] = b
		if filepath.Base(rel) == "index.html" {
			r.files["/"+filepath.ToSlash(filepath.Dir(rel))+"/"] = b
		}
		return nil
	})
	if err != nil {
		return err
	}
	if b, ok := r.files["/./"]; ok {
		r.files["/"] = b
	}
	r.render(time.Now())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		gnet.Stop(context.Background(), r.addr)
	}()
	return gnet.Run(r, r.addr,
		gnet.WithMulticore(loops > 1), gnet.WithNumEventLoop(loops),
		gnet.WithReusePort(true), gnet.WithReuseAddr(true), gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithLockOSThread(true), gnet.WithTicker(true))
}

// render builds every response with now's Date line.
func (r *responder) render(now time.Time) {
	date := now.UTC().AppendFormat(nil, "Mon, 02 Jan 2006 15:04:05 GMT")
	build := func(status string, body []byte) []byte {
		b := []byte("HTTP/1.1 " + status + "\r\nServer: gnet\r\nDate: ")
		b = append(b, date...)
		b = append(b, "\r\nContent-Type: text/html\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n\r\n"...)
		return append(b, body...)
	}
	m := make(map[string][]byte, len(r.files))
	for p, body := range r.files {
		m[p] = build("200 OK", body)
	}
	nf := build("404 Not Found", []byte("not found\n"))
	r.resp.Store(&m)
	r.notFound.Store(&nf)
}

// OnTick refreshes the Date line once a second.
func (r *responder) OnTick() (time.Duration, gnet.Action) {
	r.render(time.Now())
	return time.Second, gnet.None
}

// OnTraffic answers every complete request in the input with one write.
func (r *responder) OnTraffic(c gnet.Conn) gnet.Action {
	in, _ := c.Peek(-1)
	m := *r.resp.Load()
	var out [][]byte
	used, closeAfter := 0, false
	for {
		end := bytes.Index(in[used:], []byte("\r\n\r\n"))
		if end < 0 {
			break
		}
		req := in[used : used+end]
		used += end + 4
		resp := *r.notFound.Load()
		if line, _, _ := bytes.Cut(req, []byte("\r\n")); bytes.HasPrefix(line, []byte("GET ")) {
			path, _, _ := bytes.Cut(line[4:], []byte(" "))
			if b, ok := m[string(path)]; ok {
				resp = b
			}
		}
		out = append(out, resp)
		if bytes.Contains(req, []byte("\r\nConnection: close")) || bytes.Contains(req, []byte("\r\nconnection: close")) {
			closeAfter = true
			break
		}
	}
	c.Discard(used)
	if len(out) == 1 {
		c.Write(out[0])
	} else if len(out) > 1 {
		c.Writev(out)
	}
	if closeAfter {
		return gnet.Close
	}
	return gnet.None
}
