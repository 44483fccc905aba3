//go:build !linux

package child

import "syscall"

// sysProcAttr: outside Linux a crashed worker's child outlives it.
func sysProcAttr() *syscall.SysProcAttr { return nil }
