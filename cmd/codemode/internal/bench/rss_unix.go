//go:build unix && !darwin

package bench

import (
	"os"
	"syscall"
)

// peakRSS is a finished process's peak resident set in bytes (the kernel
// reports kibibytes).
func peakRSS(p *os.ProcessState) (int64, bool) {
	u, ok := p.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, false
	}
	return int64(u.Maxrss) << 10, true
}
