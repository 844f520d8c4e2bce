// Package uring is twinloop's completion-based backend on io_uring, through
// github.com/pawelgaczynski/giouring.
package uring
