package core

import (
	"errors"

	"golang.org/x/sys/unix"
)

var errAgain = errors.New("EAGAIN")

// readFD is a backend's read of a CGI pipe, for the sans-I/O tests.
func readFD(fd int, p []byte) (int, error) {
	for {
		n, err := unix.Read(fd, p)
		switch err {
		case nil:
			return n, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, errAgain
		}
		return n, err
	}
}
