package cpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
)

// TestGemmBFloat16Paths runs Device.Gemm on a strided batch of bfloat16
// products (with a shared B, and small entries that run side by side) on
// each path this machine has, widening and each bfloat16 kernel, and
// checks it bit for bit against the path run directly on each entry: the
// float32 GEMM of the widened values, or the kernel (bf16With). The kernel
// paths must not allocate (no widened copies).
func TestGemmBFloat16Paths(t *testing.T) {
	initGemm()
	defer func(kb *bf16Kernel) { bf16Use = kb }(bf16Use)
	d := New()
	rng := rand.New(rand.NewPCG(11, 12))
	paths := append([]*bf16Kernel{nil}, bf16Kernels...)
	for _, kb := range paths {
		for _, s := range []struct {
			tA, tB         bool
			m, n, k, batch int
			sharedB        bool
			alpha, beta    float32
			name           string
		}{
			{false, true, 37, 70, 45, 3, false, 1, 0, "nt"},
			{true, false, 20, 33, 64, 2, true, -0.5, 1, "tn-sharedB"},
			{false, false, 130, 100, 300, 1, false, 1, 0.25, "nn"},
			{false, true, 8, 8, 16, 6, false, 1, 0, "small-batch"},
		} {
			name := "float32"
			if kb != nil {
				name = kb.name
			}
			t.Run(name+"/"+s.name, func(t *testing.T) {
				rowsA, colsA, rowsB, colsB := s.m, s.k, s.k, s.n
				if s.tA {
					rowsA, colsA = colsA, rowsA
				}
				if s.tB {
					rowsB, colsB = colsB, rowsB
				}
				sa, sb, sc := rowsA*colsA+3, rowsB*colsB+5, s.m*s.n+1
				nb := s.batch
				if s.sharedB {
					sb, nb = 0, 1
				}
				a16 := make([]uint16, s.batch*sa)
				b16 := make([]uint16, nb*(rowsB*colsB+5))
				for i := range a16 {
					a16[i] = device.BFloat16FromFloat32(float32(rng.NormFloat64()))
				}
				for i := range b16 {
					b16[i] = device.BFloat16FromFloat32(float32(rng.NormFloat64()))
				}
				c := make([]float32, s.batch*sc)
				for i := range c {
					c[i] = float32(rng.NormFloat64())
				}
				want := append([]float32(nil), c...)
				A, _ := d.Alloc(device.BFloat16, len(a16))
				B, _ := d.Alloc(device.BFloat16, len(b16))
				copy(BFloat16s(A), a16)
				copy(BFloat16s(B), b16)
				C := NewFloat32(c)
				g := device.GemmArgs{TransA: s.tA, TransB: s.tB, M: s.m, N: s.n, K: s.k, Alpha: s.alpha, Beta: s.beta,
					A: A, LDA: colsA, StrideA: sa, B: B, LDB: colsB, StrideB: sb, C: C, LDC: s.n, StrideC: sc, Batch: s.batch}
				bf16Use = kb
				d.Gemm(g)
				af, bf := make([]float32, len(a16)), make([]float32, len(b16))
				fromBFloat16(af, a16)
				fromBFloat16(bf, b16)
				for e := range s.batch {
					aw, bw, cw := a16[e*sa:], b16[e*sb:], want[e*sc:]
					if kb == nil {
						sgemmWith(gemmUse, 1, s.tA, s.tB, s.m, s.n, s.k, s.alpha, af[e*sa:], colsA, bf[e*sb:], colsB, s.beta, cw, s.n)
					} else {
						bf16With(kb, 1, s.tA, s.tB, s.m, s.n, s.k, s.alpha, aw, colsA, bw, colsB, s.beta, cw, s.n)
					}
				}
				for i := range c {
					if math.Float32bits(c[i]) != math.Float32bits(want[i]) {
						t.Fatalf("C[%d] = %v, the path run on each entry gives %v", i, c[i], want[i])
					}
				}
				if kb != nil && s.batch == 1 {
					if n := testing.AllocsPerRun(3, func() { d.Gemm(g) }); n != 0 {
						t.Errorf("Device.Gemm on the %s kernel allocated %v times per call", kb.name, n)
					}
				}
			})
		}
	}
}

// TestChooseBF16 checks the automatic rule and every HILBERT_GEMM_BF16
// value: which kernel runs, and that the description says why.
func TestChooseBF16(t *testing.T) {
	amx := &bf16Kernel{name: "amx", mr: 32, nr: 32, tiles: true}
	dot := &bf16Kernel{name: "avx512bf16", mr: 12, nr: 32}
	both := []*bf16Kernel{amx, dot}
	for _, c := range []struct {
		name   string
		env    bf16Env
		want   *bf16Kernel
		has    []string
		errHas string
	}{
		{"auto-amx", bf16Env{gemm: gemmNative, kernels: both}, amx, []string{"amx kernel 32x32 (AMX TDPBF16PS)"}, ""},
		{"auto-intel-dot", bf16Env{gemm: gemmNative, kernels: []*bf16Kernel{dot}}, nil, []string{"widened to float32", "half the multiply-adds"}, ""},
		{"auto-amd-dot", bf16Env{gemm: gemmNative, kernels: []*bf16Kernel{dot}, dotFast: true}, dot, []string{"avx512bf16 kernel 12x32 (VDPBF16PS)"}, ""},
		{"auto-none", bf16Env{gemm: gemmNative}, nil, []string{"neither usable AMX-BF16 nor AVX512-BF16"}, ""},
		{"auto-none-godebug", bf16Env{gemm: gemmNative, godebug: "cpu.avx512f=off"}, nil, []string{"GODEBUG=cpu.avx512f=off may hide them"}, ""},
		{"auto-openblas", bf16Env{gemm: gemmOpenBLAS, kernels: both}, nil, []string{"widened to float32 (the bfloat16 kernels belong to the native GEMM)"}, ""},
		{"forced-float32", bf16Env{mode: "float32", gemm: gemmNative, kernels: both}, nil, []string{"widened to float32, forced by HILBERT_GEMM_BF16"}, ""},
		{"forced-dot-on-intel", bf16Env{mode: "avx512bf16", gemm: gemmNative, kernels: both}, dot, []string{"avx512bf16 kernel 12x32 (VDPBF16PS), forced by HILBERT_GEMM_BF16"}, ""},
		{"forced-amx-missing", bf16Env{mode: "amx", gemm: gemmNative, kernels: []*bf16Kernel{dot}}, nil, []string{"widened to float32"}, "HILBERT_GEMM_BF16=amx: this CPU (or this process) cannot run the amx kernel"},
		{"forced-amx-on-gonum", bf16Env{mode: "amx", gemm: gemmGo, kernels: both}, nil, []string{"widened to float32"}, "belong to the native GEMM, and this process runs go"},
		{"bad-mode", bf16Env{mode: "fast", gemm: gemmNative, kernels: both}, amx, []string{"amx kernel"}, `HILBERT_GEMM_BF16="fast": want amx, avx512bf16, float32 or auto`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := chooseBF16(c.env)
			if got.kernel != c.want {
				t.Errorf("chose %v, want %v (%s)", got.kernel, c.want, got.desc)
			}
			for _, s := range c.has {
				if !strings.Contains(got.desc, s) {
					t.Errorf("description %q lacks %q", got.desc, s)
				}
			}
			if (got.err != nil) != (c.errHas != "") || got.err != nil && !strings.Contains(got.err.Error(), c.errHas) {
				t.Errorf("error %v, want one with %q", got.err, c.errHas)
			}
		})
	}
}

// TestBFloat16KernelChoice runs this test binary with the switches that
// choose the bfloat16 path (HILBERT_GEMM_BF16, GODEBUG, HILBERT_GEMM) and
// checks what the child reports: the CI legs that hide AVX-512 or run
// OpenBLAS or gonum widen, and the kernels this CPU has can be forced.
func TestBFloat16KernelChoice(t *testing.T) {
	if os.Getenv("HILBERT_BF16_CHILD") != "" {
		fmt.Printf("bfloat16 path: %s\n", BFloat16Kernel())
		return
	}
	cases := []struct {
		env  []string
		want string
	}{
		{[]string{"HILBERT_GEMM_BF16=float32"}, bf16Widen},
		{[]string{"HILBERT_GEMM=go"}, bf16Widen},
		{[]string{"GODEBUG=cpu.avx512f=off"}, bf16Widen},
	}
	for _, kb := range bf16Kernels {
		cases = append(cases, struct {
			env  []string
			want string
		}{[]string{"HILBERT_GEMM_BF16=" + kb.name}, kb.name})
	}
	if runtime.GOARCH == "amd64" && len(bf16Kernels) == 2 {
		// GODEBUG hides AMX: VDPBF16PS remains, used on AMD only.
		want := bf16Widen
		if dotBF16Fast() {
			want = "avx512bf16"
		}
		cases = append(cases, struct {
			env  []string
			want string
		}{[]string{"GODEBUG=cpu.amxbf16=off"}, want})
	}
	for _, c := range cases {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBFloat16KernelChoice$", "-test.count=1")
		cmd.Env = append(os.Environ(), append([]string{"HILBERT_BF16_CHILD=1", "HILBERT_GEMM_BF16=", "HILBERT_GEMM="}, c.env...)...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "bfloat16 path: "+c.want+"\n") {
			t.Errorf("%v: want the %s path, the child says:\n%s", c.env, c.want, out)
		}
	}
}
