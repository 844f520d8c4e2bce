//go:build !linux

package main

import (
	"errors"
	"fmt"
)

func generate(config) (result, error) {
	return result{}, fmt.Errorf("loadgen needs epoll and timerfd (Linux): %w", errors.ErrUnsupported)
}
