//go:build !linux

package uring

import (
	"context"
	"errors"

	"github.com/twinloop/twinloop/core"
)

// Backend is the io_uring backend, which exists on Linux only.
type Backend struct{ OneShot, SubmitEach, RawSubmit, ReadBodies bool }

func New() *Backend           { return &Backend{} }
func (*Backend) Name() string { return "uring" }
func (*Backend) Probe() error { return errors.ErrUnsupported }
func (*Backend) Serve(context.Context, *core.Server, *core.Listeners) error {
	return errors.ErrUnsupported
}
