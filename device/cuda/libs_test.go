package cuda

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// isolateSearch points every search root at empty temp folders.
func isolateSearch(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, env := range []string{LibDirEnv, "CUDA_PATH", "CUDA_HOME", "LD_LIBRARY_PATH", "CONDA_PREFIX", "PYTHONPATH"} {
		t.Setenv(env, "")
	}
	t.Setenv("HILBERT_CUDA_NO_PYTHON", "1")
	t.Setenv("HOME", filepath.Join(root, "home"))
	t.Setenv("VIRTUAL_ENV", filepath.Join(root, "venv"))
	return root
}

func TestSearchDirsEnvFirst(t *testing.T) {
	root := isolateSearch(t)
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	os.MkdirAll(a, 0o755)
	os.MkdirAll(b, 0o755)
	t.Setenv(LibDirEnv, a+string(os.PathListSeparator)+filepath.Join(root, "missing")+string(os.PathListSeparator)+b)
	dirs := searchDirs()
	if len(dirs) < 2 || dirs[0] != a || dirs[1] != b {
		t.Fatalf("searchDirs() = %v, want %s then %s first (missing folders dropped)", dirs, a, b)
	}
}

func TestSearchDirsSitePackages(t *testing.T) {
	root := isolateSearch(t)
	sp := filepath.Join(root, "venv", "lib", "python3.12", "site-packages")
	var libDirs []string
	for _, pkg := range []string{"cublas", "cuda_nvrtc", "cu13"} {
		d := filepath.Join(sp, "nvidia", pkg, "lib")
		os.MkdirAll(d, 0o755)
		libDirs = append(libDirs, d)
	}
	os.WriteFile(filepath.Join(libDirs[0], "libcublas.so.13"), []byte("not an ELF"), 0o644)
	dirs := searchDirs()
	for _, d := range libDirs {
		if !slices.Contains(dirs, d) {
			t.Errorf("searchDirs() = %v lacks %s", dirs, d)
		}
	}
	// The fake library is found and fails to load: the error names it.
	_, err := openLibrary("cuBLAS", []string{"libcublas.so.13"}, dirs)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(libDirs[0], "libcublas.so.13")) {
		t.Errorf("loading a broken library: %v", err)
	}
}

func TestOpenLibraryNotFound(t *testing.T) {
	root := isolateSearch(t)
	t.Setenv(LibDirEnv, root)
	_, err := openLibrary("cuBLAS", []string{"libcublas.so.99"}, searchDirs())
	if err == nil {
		t.Fatal("found a library that does not exist")
	}
	for _, want := range []string{"cuBLAS", "libcublas.so.99", root, LibDirEnv} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestNewWithoutLibraries(t *testing.T) {
	root := isolateSearch(t)
	t.Setenv(LibDirEnv, root)
	old := driverLibNames
	driverLibNames = []string{"libcuda-hilbert-absent.so.1"}
	defer func() { driverLibNames = old }()
	d, err := New(0)
	if err == nil {
		d.Close()
		t.Fatal("New succeeded without a driver")
	}
	if !strings.Contains(err.Error(), "searched") || !strings.Contains(err.Error(), root) {
		t.Errorf("error %q does not say what was searched", err)
	}
}

func TestSizeClass(t *testing.T) {
	for _, c := range []struct{ in, want uint64 }{{1, 512}, {512, 512}, {513, 1024}, {3000, 4096}, {1 << 20, 1 << 20}, {1<<20 + 1, 2 << 20}, {5<<20 - 3, 5 << 20}} {
		if got := sizeClass(c.in); got != c.want {
			t.Errorf("sizeClass(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestBF16Conversion(t *testing.T) {
	for _, c := range []struct {
		in   float32
		want uint16
	}{{1, 0x3f80}, {-2, 0xc000}, {1.00390625, 0x3f80}, {1.01171875, 0x3f82}, {float32(math.Inf(1)), 0x7f80}, {3.4e38, 0x7f80}} {
		if got := bf16FromFloat32(c.in); got != c.want {
			t.Errorf("bf16(%v) = %#x, want %#x", c.in, got, c.want)
		}
	}
}
