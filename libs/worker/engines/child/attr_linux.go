package child

import "syscall"

// sysProcAttr has the kernel kill the child when the worker dies, so a
// crashed worker leaves no engine holding its port and memory.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
