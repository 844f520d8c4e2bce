package uring

import (
	"context"
	"errors"
	"fmt"

	"github.com/twinloop/twinloop/core"
)

// Backend is the io_uring backend.
type Backend struct{}

// New returns the io_uring backend.
func New() *Backend { return &Backend{} }

// Name is the --backend value.
func (*Backend) Name() string { return "uring" }

// Probe reports that this build has no io_uring loop yet.
func (*Backend) Probe() error {
	return fmt.Errorf("the io_uring backend is not built yet: %w", errors.ErrUnsupported)
}

// Serve refuses to run.
func (b *Backend) Serve(context.Context, *core.Server, *core.Listeners) error { return b.Probe() }
