// Command gohttp is the Go standard library's file server, the baseline the
// benchmarks (scripts/steps/grid.steps) compare twinloop with: net/http's
// http.FileServer on one address and directory, nothing else.
//
//	gohttp -listen 127.0.0.1:8081 -dir /tmp/docroot
//
// It stops on SIGINT or SIGTERM. GOMAXPROCS follows the CPUs that taskset
// leaves it, as the Go runtime does by default.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "address to listen on")
	dir := flag.String("dir", ".", "directory to serve")
	flag.Parse()

	srv := &http.Server{Addr: *listen, Handler: http.FileServer(http.Dir(*dir))}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "gohttp: %v\n", err)
		os.Exit(1)
	}
}
