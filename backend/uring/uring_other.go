//go:build !linux

package uring

import (
	"context"
	"errors"

	"github.com/twinloop/twinloop/core"
)

// Backend is the io_uring backend, which exists on Linux only.
type Backend struct {
	OneShot, SubmitEach, RawSubmit, ReadBodies, ViewBodies, SendZC bool
	Wait                                                           Wait
	PipeBudget                                                     int64
}
