package main

import (
	"net"
	"os"
)

// notify tells systemd the server's state, for units with Type=notify
// (deploy/twinloop.service): "READY=1" once the listeners are open, so that
// `systemctl start` returns only when the server can take connections (the
// point where an old server may be stopped after a --takeover), and
// "STOPPING=1" when the shutdown begins. Without $NOTIFY_SOCKET it does
// nothing. This is sd_notify(3)'s protocol: one datagram on a unix socket
// (an abstract one when the name starts with @, which package net maps).
func notify(state string) {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return
	}
	defer c.Close()
	c.Write([]byte(state))
}
