package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/cuda"
	"github.com/hilbert-ml/hilbert/dist"
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

// openDevice opens "cpu", "cuda" or "cuda:N".
func openDevice(name string) (device.Device, error) {
	switch {
	case name == "" || name == "cpu":
		return cpu.New(), nil
	case name == "cuda" || strings.HasPrefix(name, "cuda:"):
		// Plain cuda is the local rank's GPU under a launcher (one GPU per
		// process on a machine), GPU 0 otherwise.
		n, err := dist.LocalRank()
		if err != nil {
			return nil, fmt.Errorf("-device %s: %w", name, err)
		}
		if rest, ok := strings.CutPrefix(name, "cuda:"); ok {
			if _, err := fmt.Sscan(rest, &n); err != nil {
				return nil, fmt.Errorf("-device %q: want cuda:N", name)
			}
		}
		d, err := cuda.New(n)
		if err != nil {
			return nil, fmt.Errorf("-device %s: %w (use -device cpu to train on the CPU)", name, err)
		}
		return d, nil
	}
	return nil, fmt.Errorf("-device %q: want cpu, cuda or cuda:N", name)
}
