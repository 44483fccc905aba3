//go:build !(ucx && cgo)

package ucx_test

import (
	"errors"
	"testing"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/backend/ucx"
)

func TestUnavailable(t *testing.T) {
	t.Parallel()
	_, err := nixl.NewAgent(nixl.Config{Name: "a", Backends: []nixl.BackendFactory{ucx.New(ucx.Config{})}})
	if !errors.Is(err, ucx.ErrUnavailable) {
		t.Fatalf("NewAgent err = %v, want ErrUnavailable", err)
	}
}
