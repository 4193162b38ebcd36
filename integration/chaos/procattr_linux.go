package chaos

import "syscall"

// procAttr makes the kernel SIGKILL a server when the test process dies, so
// an interrupted campaign leaves no node behind.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
