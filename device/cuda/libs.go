package cuda

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/ebitengine/purego"
)

// LibDirEnv names the environment variable holding a list of directories
// (separated by the OS path-list separator) searched first for the CUDA
// libraries.
const LibDirEnv = "HILBERT_CUDA_LIB_DIR"

// Library names, newest first.
var (
	driverLibNames = []string{"libcuda.so.1", "libcuda.so"}
	cublasLibNames = []string{"libcublas.so.13", "libcublas.so.12"}
	nvrtcLibNames  = []string{"libnvrtc.so.13", "libnvrtc.so.12"}
)

// systemLibDirs are the usual places of the driver and toolkit libraries.
var systemLibDirs = []string{
	"/usr/local/cuda/lib64",
	"/usr/local/cuda/targets/x86_64-linux/lib",
	"/usr/local/cuda/targets/sbsa-linux/lib",
	"/usr/lib/x86_64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu",
	"/usr/lib64",
	"/usr/lib",
	"/lib/x86_64-linux-gnu",
	"/lib64",
	"/usr/lib/wsl/lib",
}

// LibrarySearchDirs returns the folders searched for the CUDA libraries
// (and NVIDIA's others, such as NCCL), in the order searchDirs gives.
func LibrarySearchDirs() []string { return searchDirs() }

// searchDirs returns the directories searched for a CUDA library, in order:
// the LibDirEnv list, CUDA_PATH/CUDA_HOME, LD_LIBRARY_PATH, the system
// directories and the nvidia/*/lib folders of every site-packages directory.
// Only existing directories are returned, each once.
func searchDirs() []string {
	var dirs []string
	dirs = append(dirs, filepath.SplitList(os.Getenv(LibDirEnv))...)
	for _, env := range []string{"CUDA_PATH", "CUDA_HOME"} {
		if root := os.Getenv(env); root != "" {
			dirs = append(dirs, filepath.Join(root, "lib64"), filepath.Join(root, "lib"))
		}
	}
	dirs = append(dirs, filepath.SplitList(os.Getenv("LD_LIBRARY_PATH"))...)
	dirs = append(dirs, systemLibDirs...)
	for _, sp := range sitePackages() {
		m, _ := filepath.Glob(filepath.Join(sp, "nvidia", "*", "lib"))
		sort.Strings(m)
		dirs = append(dirs, m...)
	}
	seen := map[string]bool{}
	out := dirs[:0]
	for _, d := range dirs {
		if d == "" || seen[d] {
			continue
		}
		seen[d] = true
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

// sitePackages lists candidate Python site-packages directories: those of
// an active virtualenv or conda environment, the user's, the system's, the
// entries of PYTHONPATH, and whatever python3 itself reports.
func sitePackages() []string {
	var roots []string
	for _, env := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if p := os.Getenv(env); p != "" {
			roots = append(roots, p)
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		roots = append(roots, filepath.Join(home, ".local"))
	}
	roots = append(roots, "/usr/local", "/usr", "/opt/conda")
	var out []string
	for _, r := range roots {
		for _, pat := range []string{"lib/python3*/site-packages", "lib/python3*/dist-packages", "lib64/python3*/site-packages"} {
			m, _ := filepath.Glob(filepath.Join(r, pat))
			sort.Strings(m)
			out = append(out, m...)
		}
	}
	out = append(out, filepath.SplitList(os.Getenv("PYTHONPATH"))...)
	return append(out, pythonSitePackages()...)
}

// pythonSitePackages asks python3 (if on PATH) where its packages live.
// HILBERT_CUDA_NO_PYTHON=1 disables the probe (tests use it).
func pythonSitePackages() []string {
	if os.Getenv("HILBERT_CUDA_NO_PYTHON") == "1" {
		return nil
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil
	}
	out, err := exec.Command(py, "-c",
		"import site,sys;print('\\n'.join(site.getsitepackages()+[site.getusersitepackages()]+sys.path))").Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

// library is one dlopen'ed shared object.
type library struct {
	path   string
	handle uintptr
}

// openLibrary loads the first of names found, trying every name in every
// directory of dirs, then the bare name through the system loader. The
// error lists the names and directories that were searched.
func openLibrary(what string, names []string, dirs []string) (*library, error) {
	var tried []string
	for _, name := range names {
		for _, dir := range dirs {
			p := filepath.Join(dir, name)
			if _, err := os.Stat(p); err != nil {
				continue
			}
			preloadCompanions(dir, name)
			h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
			if err == nil {
				return &library{path: p, handle: h}, nil
			}
			tried = append(tried, fmt.Sprintf("%s: %v", p, err))
		}
	}
	for _, name := range names {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			return &library{path: name, handle: h}, nil
		}
	}
	msg := fmt.Sprintf("cuda: %s not found: searched %s in %s and the system loader path; set %s to the folder that holds it",
		what, strings.Join(names, ", "), formatDirs(dirs), LibDirEnv)
	if len(tried) > 0 {
		msg += "; failed to load: " + strings.Join(tried, "; ")
	}
	return nil, fmt.Errorf("%s (GOOS=%s)", msg, runtime.GOOS)
}

// preloadCompanions loads libraries that a pip wheel's library expects next
// to itself (NVRTC's builtins, cuBLAS's cublasLt), so that a directory not
// on the loader path still works.
func preloadCompanions(dir, name string) {
	var pat string
	switch {
	case strings.HasPrefix(name, "libnvrtc."):
		pat = "libnvrtc-builtins.so*"
	case strings.HasPrefix(name, "libcublas."):
		pat = "libcublasLt.so" + strings.TrimPrefix(name, "libcublas.so")
	default:
		return
	}
	m, _ := filepath.Glob(filepath.Join(dir, pat))
	for _, p := range m {
		purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL) //nolint:errcheck // best effort
	}
}

func formatDirs(dirs []string) string {
	if len(dirs) == 0 {
		return "[no existing directories]"
	}
	return "[" + strings.Join(dirs, " ") + "]"
}
