//go:build !linux

package blocking

import (
	"context"
	"errors"

	"github.com/twinloop/twinloop/core"
)

// Backend is the blocking backend, which exists on Linux only.
type Backend struct{}

func New() *Backend           { return &Backend{} }
func (*Backend) Name() string { return "blocking" }
func (*Backend) Probe() error { return errors.ErrUnsupported }
func (*Backend) Serve(context.Context, *core.Server, *core.Listeners) error {
	return errors.ErrUnsupported
}
