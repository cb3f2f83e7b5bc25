package cpu

import (
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// cpuinfoFlags returns the feature flags of the first processor in
// /proc/cpuinfo, read independently of golang.org/x/sys/cpu.
func cpuinfoFlags(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skipf("no /proc/cpuinfo to read the CPU's features from (%v); the kernel choice is not checked", err)
	}
	flags := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(name) == "flags" {
			for _, f := range strings.Fields(value) {
				flags[f] = true
			}
			return flags
		}
	}
	t.Fatalf("/proc/cpuinfo has no flags line")
	return nil
}

// godebugOff returns the CPU features GODEBUG turns off (cpu.X=off; cpu.all=off
// turns off all), as golang.org/x/sys/cpu reads them: a later setting wins.
func godebugOff(godebug string) (off map[string]bool, all bool) {
	off = map[string]bool{}
	for _, field := range strings.Split(godebug, ",") {
		key, value, ok := strings.Cut(strings.TrimPrefix(field, "cpu."), "=")
		if !ok || !strings.HasPrefix(field, "cpu.") {
			continue
		}
		switch {
		case key == "all":
			all, off = value == "off", map[string]bool{}
		case value == "off":
			off[key] = true
		case value == "on":
			delete(off, key)
		}
	}
	return off, all
}

// expectedKernel is the kernel the rule of native_amd64.go picks for a CPU
// with these /proc/cpuinfo flags under this GODEBUG.
func expectedKernel(goarch string, flags map[string]bool, godebug string) string {
	if goarch != "amd64" {
		return "go"
	}
	off, all := godebugOff(godebug)
	has := func(f string) bool { return flags[f] && !off[f] && !all }
	switch {
	case has("avx512f"):
		return "avx512"
	case has("avx2") && has("fma"):
		return "avx2"
	}
	return "go"
}

func TestExpectedKernel(t *testing.T) {
	full := map[string]bool{"avx512f": true, "avx2": true, "fma": true}
	avx2 := map[string]bool{"avx2": true, "fma": true}
	for _, c := range []struct {
		goarch  string
		flags   map[string]bool
		godebug string
		want    string
	}{
		{"amd64", full, "", "avx512"},
		{"amd64", full, "cpu.avx512f=off", "avx2"},
		{"amd64", full, "madvdontneed=1,cpu.avx512f=off", "avx2"},
		{"amd64", full, "cpu.avx512f=off,cpu.avx512f=on", "avx512"},
		{"amd64", full, "cpu.avx512f=off,cpu.fma=off", "go"},
		{"amd64", full, "cpu.all=off", "go"},
		{"amd64", avx2, "", "avx2"},
		{"amd64", map[string]bool{"avx2": true}, "", "go"},
		{"amd64", map[string]bool{}, "", "go"},
		{"arm64", full, "", "go"},
		{"riscv64", nil, "", "go"},
	} {
		if got := expectedKernel(c.goarch, c.flags, c.godebug); got != c.want {
			t.Errorf("expectedKernel(%s, %v, %q) = %s, want %s", c.goarch, c.flags, c.godebug, got, c.want)
		}
	}
}

// TestNativeKernelMatchesCPU fails when the native GEMM's kernel is not the
// one this CPU's features (read from /proc/cpuinfo, not x/sys/cpu) and
// GODEBUG call for: an AVX-512 machine on the AVX2 kernel, or an AVX2 one on
// the portable kernel, runs several times slower without any error.
func TestNativeKernelMatchesCPU(t *testing.T) {
	godebug := os.Getenv("GODEBUG")
	want := "go"
	if runtime.GOARCH == "amd64" {
		want = expectedKernel(runtime.GOARCH, cpuinfoFlags(t), godebug)
	}
	t.Logf("native kernel: %s (GODEBUG=%q)", nativeBest.name, godebug)
	if nativeBest.name != want {
		t.Fatalf("the native GEMM chose its %s kernel, but this CPU's features (/proc/cpuinfo) with GODEBUG=%q call for %s: the kernel selection in native_amd64.go is broken",
			nativeBest.name, godebug, want)
	}
	if nativeKernels[len(nativeKernels)-1] != goKernel {
		t.Errorf("the last kernel is %s, want the portable go kernel", nativeKernels[len(nativeKernels)-1].name)
	}
}

// TestNativeKernelGODEBUG reruns TestNativeKernelMatchesCPU in a child with
// GODEBUG=cpu.avx512f=off, the switch CI uses to test the AVX2 kernel on an
// AVX-512 machine, and checks that the child ran on the AVX2 kernel.
func TestNativeKernelGODEBUG(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("GOARCH %s has no assembly kernels to switch between", runtime.GOARCH)
	}
	if flags := cpuinfoFlags(t); !flags["avx2"] || !flags["fma"] {
		t.Skip("this CPU has no AVX2+FMA: GODEBUG=cpu.avx512f=off cannot select the AVX2 kernel")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNativeKernelMatchesCPU$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "GODEBUG=cpu.avx512f=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child with GODEBUG=cpu.avx512f=off: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`native kernel: (\w+)`).FindSubmatch(out)
	if m == nil || string(m[1]) != "avx2" {
		t.Fatalf("child with GODEBUG=cpu.avx512f=off did not report the avx2 kernel:\n%s", out)
	}
}

// TestBF16KernelsMatchCPU fails when the bfloat16 kernels this process
// offers are not the ones the CPU's features (/proc/cpuinfo) and GODEBUG
// call for: AMX where it has amx_bf16 and amx_tile (and Linux grants the
// tiles), VDPBF16PS where it has avx512_bf16, both only with avx512f.
func TestBF16KernelsMatchCPU(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		if len(bf16Kernels) != 0 {
			t.Fatalf("GOARCH %s offers bfloat16 kernels %v", runtime.GOARCH, bf16Kernels)
		}
		return
	}
	flags := cpuinfoFlags(t)
	off, all := godebugOff(os.Getenv("GODEBUG"))
	has := func(flag, godebug string) bool { return flags[flag] && !off[godebug] && !all }
	var want []string
	if has("avx512f", "avx512f") && has("amx_bf16", "amxbf16") && has("amx_tile", "amxtile") {
		if amxPermitted() {
			want = append(want, "amx")
		} else {
			t.Logf("the CPU has AMX-BF16 but Linux did not grant the tiles (arch_prctl): no AMX kernel")
		}
	}
	if has("avx512f", "avx512f") && has("avx512_bf16", "avx512bf16") {
		want = append(want, "avx512bf16")
	}
	var got []string
	for _, kb := range bf16Kernels {
		got = append(got, kb.name)
	}
	t.Logf("bfloat16 kernels: %v (GODEBUG=%q)", got, os.Getenv("GODEBUG"))
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("bfloat16 kernels %v, but this CPU's features (/proc/cpuinfo) with GODEBUG=%q call for %v", got, os.Getenv("GODEBUG"), want)
	}
}
