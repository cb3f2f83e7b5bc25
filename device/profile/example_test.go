package profile_test

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/profile"
)

// Wrap a device, record some work, and read what it cost.
func Example() {
	p := profile.Wrap(cpu.New())
	a, _ := p.Alloc(device.Float32, 128*128)
	c, _ := p.Alloc(device.Float32, 128*128)
	p.Record(true)
	for range 4 {
		p.Gemm(device.GemmArgs{M: 128, N: 128, K: 128, Alpha: 1, A: a, LDA: 128, B: a, LDB: 128, C: c, LDC: 128})
	}
	p.Record(false)
	for _, o := range p.Ops() {
		fmt.Printf("%s %s: %d calls, %.0f MFLOP\n", o.Name, o.Detail, o.Calls, o.Flops/1e6)
	}
	// p.WriteTable(os.Stderr, 20) prints times, shares and GFLOP/s.
	// Output:
	// Gemm 128x128x128 NN float32: 4 calls, 17 MFLOP
}
