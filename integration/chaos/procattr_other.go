//go:build !linux

package chaos

import "syscall"

func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
