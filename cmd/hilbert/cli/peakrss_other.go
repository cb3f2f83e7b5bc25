//go:build !linux

package cli

import "os"

// peakRSSMiB is a finished process's peak resident set size in MiB: not
// known on this system (0).
func peakRSSMiB(*os.ProcessState) float64 { return 0 }
