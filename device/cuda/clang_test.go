package cuda

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestKernelsCompileWithClang compiles every kernel file to PTX for sm_90
// with clang (no CUDA SDK needed: -nocudainc -nocudalib plus
// kernels/clang_shim.h). It skips when no clang is installed; on Debian
// the package is clang-19 (or clang-16).
func TestKernelsCompileWithClang(t *testing.T) {
	var clang string
	for _, name := range []string{"clang-19", "clang-18", "clang-17", "clang-16", "clang"} {
		if p, err := exec.LookPath(name); err == nil {
			clang = p
			break
		}
	}
	if clang == "" {
		t.Skip("no clang found (install Debian package clang-19) for the offline PTX compile")
	}
	files := kernelFiles()
	if len(files) == 0 {
		t.Fatal("no kernels embedded")
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), strings.TrimSuffix(f, ".cu")+".ptx")
			cmd := exec.Command(clang, "-x", "cuda", "--cuda-device-only", "--cuda-gpu-arch=sm_90",
				"-nocudainc", "-nocudalib", "-Xclang", "-target-feature", "-Xclang", "+ptx78",
				"-std=c++17", "-O2", "-S", "-Wall", "-Werror", "-Wno-unknown-cuda-version",
				"-include", "kernels/clang_shim.h", "-include", "kernels/common.cuh",
				filepath.Join("kernels", f), "-o", out)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, b)
			}
		})
	}
}
