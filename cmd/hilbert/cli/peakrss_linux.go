package cli

import (
	"os"
	"syscall"
)

// peakRSSMiB is a finished process's peak resident set size (ru_maxrss,
// KiB on Linux) in MiB, 0 where it is not known.
func peakRSSMiB(ps *os.ProcessState) float64 {
	if ps == nil {
		return 0
	}
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return float64(ru.Maxrss) / 1024
}
