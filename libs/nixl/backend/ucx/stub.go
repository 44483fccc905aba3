//go:build !(ucx && cgo)

package ucx

import "switchyard.dev/libs/nixl"

// Available reports whether the cgo backend is compiled in.
const Available = false

// New returns a factory that always fails with ErrUnavailable: this build
// has no UCX (see the package doc for the build tag).
func New(Config) nixl.BackendFactory {
	return func(nixl.Env) (nixl.Backend, error) { return nil, ErrUnavailable }
}
