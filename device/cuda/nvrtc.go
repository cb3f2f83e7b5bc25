package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"github.com/hilbert-ml/hilbert/internal/atomicfile"
)

// CacheDirEnv names the environment variable that overrides CacheDir.
const CacheDirEnv = "HILBERT_CUDA_CACHE_DIR"

// nvrtcAPI holds the NVRTC entry points this package uses.
type nvrtcAPI struct {
	lib *library

	version      func(major, minor *int32) int32
	create       func(prog *uintptr, src, name string, numHeaders int32, headers, includeNames unsafe.Pointer) int32
	compile      func(prog uintptr, numOptions int32, options unsafe.Pointer) int32
	logSize      func(prog uintptr, n *uint64) int32
	getLog       func(prog uintptr, log *byte) int32
	cubinSize    func(prog uintptr, n *uint64) int32
	getCubin     func(prog uintptr, cubin *byte) int32
	destroy      func(prog *uintptr) int32
	errorString  func(status int32) uintptr
	major, minor int32
}

// loadNVRTC opens NVRTC and binds its entry points.
func loadNVRTC(dirs []string) (*nvrtcAPI, error) {
	n := &nvrtcAPI{}
	lib, err := bindLibrary("NVRTC", nvrtcLibNames, dirs, []symbol{
		sym(&n.version, "nvrtcVersion"),
		sym(&n.create, "nvrtcCreateProgram"),
		sym(&n.compile, "nvrtcCompileProgram"),
		sym(&n.logSize, "nvrtcGetProgramLogSize"),
		sym(&n.getLog, "nvrtcGetProgramLog"),
		sym(&n.cubinSize, "nvrtcGetCUBINSize"),
		sym(&n.getCubin, "nvrtcGetCUBIN"),
		sym(&n.destroy, "nvrtcDestroyProgram"),
		sym(&n.errorString, "nvrtcGetErrorString"),
	})
	if err != nil {
		return nil, err
	}
	n.lib = lib
	if s := n.version(&n.major, &n.minor); s != 0 {
		return nil, n.check("nvrtcVersion", s)
	}
	return n, nil
}

func (n *nvrtcAPI) check(call string, s int32) error {
	if s == 0 {
		return nil
	}
	return &Error{Call: call, Code: int(s), Message: goString(n.errorString(s))}
}

// CacheDir returns the folder where compiled kernels are cached:
// $HILBERT_CUDA_CACHE_DIR, else os.UserCacheDir()/hilbert/cuda.
func CacheDir() (string, error) {
	if d := os.Getenv(CacheDirEnv); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("cuda: no kernel cache folder (set %s): %w", CacheDirEnv, err)
	}
	return filepath.Join(base, "hilbert", "cuda"), nil
}

// compileOptions are the NVRTC options for an architecture such as "sm_90".
func compileOptions(arch string) []string {
	return []string{"--gpu-architecture=" + arch, "--std=c++17", "-default-device"}
}

// cacheKey names the cubin for source compiled for arch by this NVRTC.
func (n *nvrtcAPI) cacheKey(source, arch string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00nvrtc %d.%d\x00%s", source, arch, n.major, n.minor, strings.Join(compileOptions(arch), " "))
	return hex.EncodeToString(h.Sum(nil))
}

// cubin returns source compiled for arch, from the disk cache when it is
// there, else compiled by NVRTC and then written to the cache (a cache that
// cannot be written is not an error).
func (n *nvrtcAPI) cubin(source, arch string) ([]byte, error) {
	dir, dirErr := CacheDir()
	var path string
	if dirErr == nil {
		path = filepath.Join(dir, n.cacheKey(source, arch)+".cubin")
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return b, nil
		}
	}
	b, err := n.compileSource(source, arch)
	if err != nil {
		return nil, err
	}
	if path != "" {
		if os.MkdirAll(dir, 0o755) == nil {
			atomicfile.WriteFile(path, b) //nolint:errcheck // best effort cache
		}
	}
	return b, nil
}

// compileSource runs NVRTC; a compile error carries NVRTC's log.
func (n *nvrtcAPI) compileSource(source, arch string) ([]byte, error) {
	var prog uintptr
	if s := n.create(&prog, source, "hilbert_kernels.cu", 0, nil, nil); s != 0 {
		return nil, n.check("nvrtcCreateProgram", s)
	}
	defer n.destroy(&prog)

	opts := compileOptions(arch)
	cstrs := make([][]byte, len(opts))
	ptrs := make([]uintptr, len(opts))
	var pin runtime.Pinner
	defer pin.Unpin()
	for i, o := range opts {
		cstrs[i] = append([]byte(o), 0)
		pin.Pin(&cstrs[i][0])
		ptrs[i] = uintptr(unsafe.Pointer(&cstrs[i][0]))
	}
	status := n.compile(prog, int32(len(opts)), unsafe.Pointer(&ptrs[0]))
	runtime.KeepAlive(cstrs)
	if status != 0 {
		err := n.check("nvrtcCompileProgram", status)
		return nil, fmt.Errorf("%w (options %v):\n%s", err, opts, n.log(prog))
	}
	var size uint64
	if s := n.cubinSize(prog, &size); s != 0 {
		return nil, n.check("nvrtcGetCUBINSize", s)
	}
	if size == 0 {
		return nil, fmt.Errorf("cuda: NVRTC produced an empty cubin for %s", arch)
	}
	b := make([]byte, size)
	if s := n.getCubin(prog, &b[0]); s != 0 {
		return nil, n.check("nvrtcGetCUBIN", s)
	}
	return b, nil
}

func (n *nvrtcAPI) log(prog uintptr) string {
	var size uint64
	if n.logSize(prog, &size) != 0 || size <= 1 {
		return ""
	}
	b := make([]byte, size)
	if n.getLog(prog, &b[0]) != 0 {
		return ""
	}
	return strings.TrimRight(string(b), "\x00\n")
}
