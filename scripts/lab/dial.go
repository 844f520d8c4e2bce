package lab

import (
	"fmt"
	"net"
	"time"
)

// DialServer connects to addr, trying again every 20 ms for up to 10 s
// while a server that was just started gets to listen there.
func DialServer(addr string) (net.Conn, error) {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the server did not listen on %s: %w", addr, err)
		}
	}
}
