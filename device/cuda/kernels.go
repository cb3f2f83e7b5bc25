package cuda

import (
	"embed"
	"strings"
)

// kernelFS holds the CUDA C sources. common.cuh is prepended to the .cu
// files (NVRTC gets one self-contained translation unit); clang_shim.h is
// only for the offline clang test.
//
//go:embed kernels/*.cu kernels/*.cuh
var kernelFS embed.FS

// kernelSource returns the translation unit NVRTC compiles: common.cuh and
// then every .cu file in name order.
func kernelSource() string {
	var sb strings.Builder
	common, err := kernelFS.ReadFile("kernels/common.cuh")
	if err != nil {
		panic(err) // embedded at build time
	}
	sb.Write(common)
	names := kernelFiles()
	for _, n := range names {
		b, _ := kernelFS.ReadFile("kernels/" + n)
		sb.WriteString("\n// ---- " + n + " ----\n")
		sb.Write(b)
	}
	return sb.String()
}

// kernelFiles lists the embedded .cu files, in name order (ReadDir sorts).
func kernelFiles() []string {
	ents, _ := kernelFS.ReadDir("kernels")
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".cu") {
			names = append(names, e.Name())
		}
	}
	return names
}
