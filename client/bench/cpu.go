package bench

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) this process has used so far,
// 0 where the platform does not tell. The bench client shares the machine
// with the servers it measures, so its own cost is part of the result.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
