// Command peers runs one of the fastest Go HTTP servers as a static
// responder, the peers twinloop is compared with in make bench and make
// ladder:
//
//	peers -server gnet|fasthttp -listen 127.0.0.1:8080 -dir DOCROOT [-loops N]
//
// gnet (v2, epoll event loops) has no HTTP layer: the gnet responder reads
// every regular file under -dir into memory at start, finds each request's
// end (CRLF CRLF), and answers GET PATH with the file's prebuilt response
// (Date refreshed once a second, as twinloop does), keep-alive unless the
// request says Connection: close; anything else gets a 404. Bodies in
// requests are not supported: the benchmark sends none. It is the
// cheapest HTTP-shaped work an event loop can do, so it bounds what a
// parser and a file cache cost twinloop.
//
// fasthttp serves -dir with its own FS handler (its file cache, no
// compression, byte ranges on), GOMAXPROCS goroutine-per-connection
// workers multiplexed by the Go runtime's netpoller.
//
// This is its own Go module (scripts/peers/go.mod), so that twinloop's
// go.mod never depends on either.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
)

func main() {
	server := flag.String("server", "", "gnet or fasthttp")
	listen := flag.String("listen", "127.0.0.1:8080", "address to listen on")
	dir := flag.String("dir", ".", "document root")
	loops := flag.Int("loops", runtime.GOMAXPROCS(0), "gnet: event loops")
	flag.Parse()
	var err error
	switch *server {
	case "gnet":
		err = runGnet(*listen, *dir, *loops)
	case "fasthttp":
		err = runFasthttp(*listen, *dir)
	default:
		err = fmt.Errorf("-server must be gnet or fasthttp, not %q", *server)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "peers: %v\n", err)
		os.Exit(1)
	}
}
