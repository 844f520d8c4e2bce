package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/valyala/fasthttp"
)

// runFasthttp serves dir with fasthttp's FS handler until SIGTERM/SIGINT.
func runFasthttp(addr, dir string) error {
	fs := &fasthttp.FS{
		Root:            dir,
		IndexNames:      []string{"index.html"},
		AcceptByteRange: true,
		Compress:        false,
	}
	srv := &fasthttp.Server{Handler: fs.NewRequestHandler(), Name: "fasthttp"}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		srv.Shutdown()
	}()
	return srv.ListenAndServe(addr)
}
