// Package cudaemu builds a CPU emulation of the CUDA driver, cuBLAS and
// NVRTC, so that tests on machines without a GPU run the CUDA backend
// (device/cuda) end to end: its library loading, NVRTC compile and kernel
// cache, memory, launches, cuBLAS calls and the kernels' CUDA C source
// itself, which the fake NVRTC compiles with g++ and runs one thread block
// at a time with a fiber per CUDA thread (see csrc/emu_runtime.h).
//
// What it checks: the kernels' indexing, reductions, barriers and warp
// shuffles (a deadlock or a divergent __syncthreads fails the launch),
// launch configurations against the driver's limits, argument passing, and
// reads of memory no kernel wrote (fresh allocations are NaN bytes). Races
// between threads of a block show when a test runs both thread orders
// (EMU_SCHEDULE=reverse) and compares; a race that both orders happen to
// get right goes unseen. What it cannot check: speed, NVRTC-only compile
// errors, register and shared-memory limits. It is for tests only; a real
// GPU run is still needed.
package cudaemu

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

//go:embed csrc/emu.cc csrc/emu_runtime.h
var sources embed.FS

// Environment variables read by device/cuda (kept equal to its LibDirEnv
// and CacheDirEnv; a test there checks).
const (
	LibDirEnv   = "HILBERT_CUDA_LIB_DIR"
	CacheDirEnv = "HILBERT_CUDA_CACHE_DIR"
	noPythonEnv = "HILBERT_CUDA_NO_PYTHON"
)

// Libraries are the file names the emulator is installed under, one per
// -DEMU_ part of emu.cc.
var Libraries = map[string]string{"EMU_CUDA": "libcuda.so.1", "EMU_CUBLAS": "libcublas.so.13", "EMU_NVRTC": "libnvrtc.so.13"}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// Dir returns the folder holding the emulator libraries, building them on
// first use. Builds are cached under the user cache folder by a hash of
// the sources and the compiler, so test binaries of several packages share
// one. It fails when g++ is missing or the build fails.
func Dir() (string, error) {
	buildOnce.Do(func() { buildDir, buildErr = build() })
	return buildDir, buildErr
}

// ErrNoCompiler reports that no C++ compiler was found.
var ErrNoCompiler = errors.New("cudaemu: g++ not found on PATH: the CUDA emulator cannot be built")

func build() (string, error) {
	cxx, err := exec.LookPath("g++")
	if err != nil {
		return "", ErrNoCompiler
	}
	h := sha256.New()
	h.Write([]byte(cxx))
	names := []string{"emu.cc", "emu_runtime.h"}
	files := map[string][]byte{}
	for _, n := range names {
		b, err := sources.ReadFile("csrc/" + n)
		if err != nil {
			return "", err
		}
		files[n] = b
		h.Write([]byte(n))
		h.Write(b)
	}
	if v, err := exec.Command(cxx, "--version").Output(); err == nil {
		h.Write(v)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "hilbert", "cudaemu", hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("cudaemu: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "build-")
	if err != nil {
		return "", fmt.Errorf("cudaemu: %w", err)
	}
	defer os.RemoveAll(tmp)
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(tmp, n), b, 0o644); err != nil {
			return "", fmt.Errorf("cudaemu: %w", err)
		}
	}
	for def, lib := range Libraries {
		// The NVRTC part includes emu_runtime.h from the final folder.
		cmd := exec.Command(cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-Wl,-Bsymbolic", "-fvisibility=hidden",
			"-D"+def, fmt.Sprintf("-DEMU_DIR=%q", dir), "-o", filepath.Join(tmp, lib), filepath.Join(tmp, "emu.cc"), "-ldl")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("cudaemu: building %s: %v\n%s", lib, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "complete"), nil, 0o644); err != nil {
		return "", fmt.Errorf("cudaemu: %w", err)
	}
	// Another process may have finished the same build first: then its
	// folder stays and ours is removed.
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "complete")); serr != nil {
			return "", fmt.Errorf("cudaemu: installing %s: %w", dir, err)
		}
	}
	return dir, nil
}

// Setenv points device/cuda at the emulator for the rest of the test (and
// its kernel cache at a folder beside the libraries), or skips the test
// when the emulator cannot be built for want of g++. Other build failures
// fail the test.
func Setenv(tb testing.TB) {
	tb.Helper()
	dir, err := Dir()
	if errors.Is(err, ErrNoCompiler) {
		tb.Skip(err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Setenv(LibDirEnv, dir)
	tb.Setenv(CacheDirEnv, filepath.Join(dir, "kernels"))
	tb.Setenv(noPythonEnv, "1")
}
