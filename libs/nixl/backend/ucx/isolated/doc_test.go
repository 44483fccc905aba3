//go:build ucx && cgo

// Package isolated_test tests the UCX backend with UCX in a child process
// (ucx.Config.Isolate): the contract suite, and that an abort in UCX ends
// only that process, after which the agent carries on over tcp. It is a
// package of its own because its arenas must be shared memory, which the
// in-process backend's tests and benchmarks do not use.
package isolated_test
