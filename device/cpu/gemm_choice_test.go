package cpu

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// fakeBLAS returns a loader that yields a library with the given
// openblas_get_config string, or err, and counts its calls.
func fakeBLAS(config string, err error, calls *int) func() (*openBLAS, error) {
	return func() (*openBLAS, error) {
		*calls++
		if err != nil {
			return nil, err
		}
		lib := &openBLAS{path: "/usr/lib/aarch64-linux-gnu/libopenblas.so.0"}
		if config != "" {
			b := append([]byte(config), 0)
			lib.config = func() *byte { return (*byte)(unsafe.Pointer(&b[0])) }
		}
		return lib, nil
	}
}

// TestChooseGemm checks the automatic rule and every HILBERT_GEMM value:
// which GEMM runs, and that the start-up description says why, what a slow
// one costs (measured figures, not "several times") and how to install
// OpenBLAS.
func TestChooseGemm(t *testing.T) {
	notFound := errors.New("cpu: OpenBLAS not found (tried [libopenblas.so.0: no such file])")
	const cooper = "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=64"
	const prescott = "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Prescott MAX_THREADS=64"
	install := []string{"apt-get install libopenblas0-openmp", "HILBERT_OPENBLAS"}
	for _, c := range []struct {
		name     string
		mode     string
		kernel   *nativeKernel
		goarch   string
		godebug  string
		gonumAsm bool
		config   string
		blasErr  error
		want     string   // GEMM chosen
		has      []string // in the description
		hasNot   []string
		errHas   []string // in the error (none: no error)
		blasUsed bool     // whether OpenBLAS is loaded
	}{
		{name: "auto-avx512", kernel: avx512KernelForTest(), goarch: "amd64", want: gemmNative,
			has: []string{"native (avx512 kernel 12x32)"}, hasNot: []string{"slower", "install"}},
		{name: "auto-arm64-openblas", kernel: goKernel, goarch: "arm64", config: cooper, want: gemmOpenBLAS, blasUsed: true,
			has:    []string{"OpenBLAS (/usr/lib/aarch64-linux-gnu/libopenblas.so.0) " + cooper, "not for GOARCH=arm64", "OpenBLAS runs in its place"},
			hasNot: []string{"AVX2+FMA for", "no AVX2", "Prescott"}},
		{name: "auto-arm64-no-openblas", kernel: goKernel, goarch: "arm64", blasErr: notFound, want: gemmNative, blasUsed: true,
			has: append([]string{"native (go kernel 2x4)", "not for GOARCH=arm64", "OpenBLAS did not load (" + notFound.Error() + ")",
				"twice gonum's pure Go", "35 times slower"}, install...),
			hasNot: []string{"no AVX2", "several times"}},
		{name: "auto-amd64-noavx2-gonum", kernel: goKernel, goarch: "amd64", gonumAsm: true, blasErr: notFound, want: gemmGo, blasUsed: true,
			has:    append([]string{"gonum (SSE assembly)", "this CPU has no AVX2+FMA", "8 to 13 times slower", "194 against 1,580 tokens/s"}, install...),
			hasNot: []string{"several times", "GODEBUG"}},
		{name: "auto-amd64-noavx2-noasm", kernel: goKernel, goarch: "amd64", blasErr: notFound, want: gemmNative, blasUsed: true,
			has: append([]string{"native (go kernel 2x4)", "this CPU has no AVX2+FMA", "35 times slower"}, install...)},
		{name: "auto-amd64-godebug", kernel: goKernel, goarch: "amd64", godebug: "cpu.avx2=off", gonumAsm: true, config: cooper, want: gemmOpenBLAS, blasUsed: true,
			has: []string{"GODEBUG=cpu.avx2=off may hide them", "OpenBLAS runs in its place"}},
		{name: "auto-openblas-prescott", kernel: goKernel, goarch: "riscv64", config: prescott, want: gemmOpenBLAS, blasUsed: true,
			has: []string{"GOARCH=riscv64", "generic Prescott kernels", "OPENBLAS_CORETYPE"}},
		{name: "native-forced-avx512", mode: "native", kernel: avx512KernelForTest(), goarch: "amd64", want: gemmNative,
			has: []string{"native (avx512 kernel 12x32), forced by HILBERT_GEMM"}, hasNot: []string{"install"}},
		{name: "native-forced-arm64", mode: "native", kernel: goKernel, goarch: "arm64", want: gemmNative,
			has: append([]string{"native (go kernel 2x4), forced by HILBERT_GEMM", "GOARCH=arm64", "portable Go kernel runs", "35 times slower"}, install...)},
		{name: "openblas-forced", mode: "openblas", kernel: avx512KernelForTest(), goarch: "amd64", config: cooper, want: gemmOpenBLAS, blasUsed: true,
			has: []string{cooper + ", forced by HILBERT_GEMM"}, hasNot: []string{"Prescott"}},
		{name: "openblas-forced-prescott", mode: "openblas", kernel: avx512KernelForTest(), goarch: "amd64", config: prescott, want: gemmOpenBLAS, blasUsed: true,
			has: []string{"forced by HILBERT_GEMM; OpenBLAS did not recognise this CPU", "OPENBLAS_CORETYPE (SkylakeX"}},
		{name: "openblas-forced-missing", mode: "openblas", kernel: avx512KernelForTest(), goarch: "amd64", blasErr: notFound, want: gemmNative, blasUsed: true,
			has:    append([]string{"native (avx512 kernel 12x32) (HILBERT_GEMM=openblas: " + notFound.Error()}, install...),
			errHas: append([]string{"HILBERT_GEMM=openblas: cpu: OpenBLAS not found"}, install...)},
		{name: "go-forced", mode: "go", kernel: avx512KernelForTest(), goarch: "amd64", gonumAsm: true, want: gemmGo,
			has: []string{"gonum (SSE assembly), forced by HILBERT_GEMM", "8 to 13 times slower", "unset HILBERT_GEMM"}},
		{name: "gonum-forced-pure", mode: "gonum", kernel: goKernel, goarch: "arm64", want: gemmGo,
			has: []string{"gonum (pure Go, half the speed of the native GEMM's portable kernel), forced by HILBERT_GEMM", "8 to 13 times slower"}},
		{name: "bad-mode", mode: "fast", kernel: avx512KernelForTest(), goarch: "amd64", want: gemmNative,
			has: []string{"native (avx512 kernel 12x32) (HILBERT_GEMM=\"fast\""}, errHas: []string{`HILBERT_GEMM="fast": want native, openblas, go or auto`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			got := chooseGemm(gemmEnv{mode: c.mode, kernel: c.kernel, goarch: c.goarch, godebug: c.godebug,
				gonumAsm: c.gonumAsm, loadBLAS: fakeBLAS(c.config, c.blasErr, &calls)})
			if got.use != c.want {
				t.Errorf("chose %s, want %s (description %q)", got.use, c.want, got.desc)
			}
			if (calls > 0) != c.blasUsed {
				t.Errorf("OpenBLAS loaded %d times, want loaded: %v", calls, c.blasUsed)
			}
			for _, s := range c.has {
				if !strings.Contains(got.desc, s) {
					t.Errorf("description %q lacks %q", got.desc, s)
				}
			}
			for _, s := range c.hasNot {
				if strings.Contains(got.desc, s) {
					t.Errorf("description %q contains %q", got.desc, s)
				}
			}
			if len(c.errHas) == 0 && got.err != nil {
				t.Errorf("error %v, want none", got.err)
			}
			if len(c.errHas) > 0 && got.err == nil {
				t.Errorf("no error, want one with %q", c.errHas)
			}
			for _, s := range c.errHas {
				if got.err != nil && !strings.Contains(got.err.Error(), s) {
					t.Errorf("error %q lacks %q", got.err, s)
				}
			}
		})
	}
}

// avx512KernelForTest stands for an assembly kernel on every GOARCH: the
// choice only reads its name and block.
func avx512KernelForTest() *nativeKernel {
	return &nativeKernel{name: "avx512", mr: 12, nr: 32}
}

// TestGemmStartupMessages runs this test binary with environments that
// reach the slow or failed choices and checks the start-up line on stderr:
// what runs, why, and how to install OpenBLAS.
func TestGemmStartupMessages(t *testing.T) {
	missing := "HILBERT_OPENBLAS=/nonexistent/libopenblas.so.0"
	type startup struct {
		name string
		env  []string // added to (and overriding) this process's
		has  []string // in the start-up line
	}
	cases := []startup{
		{"openblas-missing", []string{"HILBERT_GEMM=openblas", missing},
			[]string{"hilbert: GEMM: native (", "HILBERT_GEMM=openblas: cpu: OpenBLAS not found (tried [/nonexistent/libopenblas.so.0:",
				"apt-get install libopenblas0-openmp", "set HILBERT_OPENBLAS"}},
		{"go-forced", []string{"HILBERT_GEMM=go"}, []string{"hilbert: GEMM: gonum (", "8 to 13 times slower"}},
	}
	if runtime.GOARCH == "amd64" {
		// Hide the assembly kernels: the automatic choice then falls back
		// to gonum's assembly, or with -tags noasm to the portable kernel.
		want := []string{"hilbert: GEMM: native (go kernel 2x4): this CPU has no AVX2+FMA", "GODEBUG=cpu.avx512f=off,cpu.avx2=off may hide them", "35 times slower", "apt-get install libopenblas0-openmp"}
		if gonumAsm {
			want = []string{"hilbert: GEMM: gonum (SSE assembly): this CPU has no AVX2+FMA", "GODEBUG=cpu.avx512f=off,cpu.avx2=off may hide them", "8 to 13 times slower", "apt-get install libopenblas0-openmp"}
		}
		cases = append(cases, startup{"auto-no-asm-kernel", []string{"HILBERT_GEMM=", missing, "GODEBUG=cpu.avx512f=off,cpu.avx2=off"}, want})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), c.env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %v\n%s", c.env, err, out)
			}
			line := ""
			for _, l := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(l, "hilbert: GEMM: ") {
					line = l
				}
			}
			for _, s := range c.has {
				if !strings.Contains(line, s) {
					t.Errorf("%v: start-up line %q lacks %q\n(output:\n%s)", c.env, line, s, out)
				}
			}
		})
	}
}

// TestOpenBLASCoreName checks the kernel set OpenBLAS reports against its
// build string (a DYNAMIC_ARCH build names the core there too) and, in a
// child, that OPENBLAS_CORETYPE changes it.
func TestOpenBLASCoreName(t *testing.T) {
	lib, err := loadBLAS()
	if err != nil {
		t.Skipf("OpenBLAS not loaded: %v", err)
	}
	core, config := OpenBLASCoreName(), lib.configString()
	t.Logf("OpenBLAS core: %s (config %q, OPENBLAS_CORETYPE=%q)", core, config, os.Getenv("OPENBLAS_CORETYPE"))
	if lib.corename == nil {
		t.Skipf("%s does not export openblas_get_corename", lib.path)
	}
	if core == "" {
		t.Fatalf("openblas_get_corename returned nothing (config %q)", config)
	}
	if strings.Contains(config, "DYNAMIC_ARCH") && !strings.Contains(strings.ToLower(config), strings.ToLower(core)) {
		t.Errorf("core %q does not appear in the build string %q", core, config)
	}
	if os.Getenv("OPENBLAS_CORETYPE") != "" || !strings.Contains(config, "DYNAMIC_ARCH") || runtime.GOARCH != "amd64" {
		return // the child, a build with one kernel set, or core names this test does not know
	}
	// Two x86 kernel sets every x86-64 CPU runs (SSE3, SSE4.2).
	other := "Prescott"
	if OpenBLASGenericCore(core) {
		other = "Nehalem"
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenBLASCoreName$", "-test.v")
	cmd.Env = append(os.Environ(), "OPENBLAS_CORETYPE="+other)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child with OPENBLAS_CORETYPE=%s: %v\n%s", other, err, out)
	}
	if !strings.Contains(string(out), "OpenBLAS core: "+other+" ") {
		t.Errorf("OPENBLAS_CORETYPE=%s did not make OpenBLAS report that core:\n%s", other, out)
	}
}

func TestOpenBLASGenericCore(t *testing.T) {
	for core, want := range map[string]bool{"Prescott": true, "prescott": true, "Cooperlake": false, "SkylakeX": false, "Haswell": false, "": false} {
		if got := OpenBLASGenericCore(core); got != want {
			t.Errorf("OpenBLASGenericCore(%q) = %v, want %v", core, got, want)
		}
	}
}

func TestUseNativeKernel(t *testing.T) {
	prev, _, _ := NativeKernel()
	defer func() {
		if err := UseNativeKernel(prev); err != nil {
			t.Fatal(err)
		}
	}()
	a := []float32{1, 2, 3, 4, 5, 6}
	b := []float32{1, 0, -1, 2, 0.5, 3}
	for _, kn := range nativeKernels {
		if err := UseNativeKernel(kn.name); err != nil {
			t.Fatalf("UseNativeKernel(%q): %v", kn.name, err)
		}
		if got, mr, nr := NativeKernel(); got != kn.name || mr != kn.mr || nr != kn.nr {
			t.Errorf("after UseNativeKernel(%q): NativeKernel() = %s %dx%d", kn.name, got, mr, nr)
		}
		if GemmName() == gemmNative && !strings.Contains(GemmDescription(), kn.name) {
			t.Errorf("after UseNativeKernel(%q): GemmDescription() = %q", kn.name, GemmDescription())
		}
		c := make([]float32, 4) // [1 2 3; 4 5 6] x [1 0; -1 2; 0.5 3]
		SgemmNative(false, false, 2, 2, 3, 1, a, 3, b, 2, 0, c, 2)
		if want := []float32{0.5, 13, 2, 28}; !slices.Equal(c, want) {
			t.Errorf("kernel %s: product %v, want %v", kn.name, c, want)
		}
	}
	err := UseNativeKernel("sse9")
	if err == nil || !strings.Contains(err.Error(), `"sse9"`) || !strings.Contains(err.Error(), "go") {
		t.Errorf("UseNativeKernel(sse9): %v; want an error naming the kernel and the ones this CPU runs", err)
	}
}
