package cli

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/cuda"
)

func init() {
	register(subcommand{
		name:    "devices",
		summary: "list the devices training can use: the CPU's GEMM and each CUDA GPU (opening one compiles its kernels)",
		run:     runDevices,
	})
}

const devicesUsage = `usage: hilbert devices

Lists the devices training can use: the CPU backend's GEMM (OpenBLAS or
pure Go) and thread count, then each CUDA GPU opened in full (libraries,
context, kernels compiled or loaded from the cache), or why CUDA is not
available. Missing CUDA is not an error; a GPU that fails to open is.

flags: none (-h prints this)
`

// runDevices prints one line per device: the CPU backend's GEMM, then each
// CUDA device opened in full (libraries, context, kernels compiled or
// loaded from the cache), or why CUDA is not available. Missing CUDA is
// not an error; a GPU that fails to open is.
func runDevices(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("devices", devicesUsage, stderr)
	if stop, err := parseCommand(fs, args); stop {
		return err
	}
	fmt.Fprintf(stdout, "%-8s GEMM: %s, %d threads\n", "cpu", cpu.GemmDescription(), cpu.Threads())
	n, err := cuda.Count()
	if err != nil {
		fmt.Fprintf(stdout, "%-8s not available: %v\n", "cuda", err)
		return nil
	}
	if n == 0 {
		fmt.Fprintf(stdout, "%-8s the driver reports no device\n", "cuda")
		return nil
	}
	dir, _ := cuda.CacheDir()
	var failed error
	for i := range n {
		d, err := cuda.New(i)
		if err != nil {
			fmt.Fprintf(stdout, "cuda:%-3d failed to open: %v\n", i, err)
			failed = fmt.Errorf("cuda:%d: %w", i, err)
			continue
		}
		fmt.Fprintln(stdout, d.Describe())
		d.Close()
	}
	fmt.Fprintf(stdout, "%-8s kernel cache %s (%s)\n", "", filepath.Clean(dir), cuda.CacheDirEnv)
	return failed
}
