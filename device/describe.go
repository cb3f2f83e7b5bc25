package device

import "strings"

// Describer is an optional interface of a backend: it says what of the
// backend changes the numbers a computation gives, so that a layer above
// (a trainer comparing a checkpoint's settings on resume, say) can record
// and compare it without importing the backend. Describe returns a
// backend's Description when it has one.
type Describer interface {
	// Description returns the backend's kind and its settings.
	Description() Description
}

// Description is what of a backend changes its numbers: its kind and the
// settings within that kind (the CPU's GEMM and thread count, which splits
// reductions; a GPU's architecture and whether TF32 products are on).
type Description struct {
	// Kind names the backend without the device's ordinal: "cpu", "cuda".
	Kind string
	// Settings are the rest, in a fixed order, e.g. gemm=native, threads=8.
	Settings []Setting
}

// Setting is one named value of a Description.
type Setting struct {
	Name, Value string
}

// Describe returns d's Description when d is a Describer, and otherwise
// one whose Kind is d's Name up to the first ':' ("cuda:0" is "cuda") and
// which has no settings.
func Describe(d Core) Description {
	if x, ok := d.(Describer); ok {
		return x.Description()
	}
	kind, _, _ := strings.Cut(d.Name(), ":")
	return Description{Kind: kind}
}

// HostMemory is an optional interface of a backend whose buffers live in
// host memory that Go code may read and write in place (the CPU's): a
// communicator hands such memory to a host library (MPI), and host
// numerics run the backend's kernels on slices they already hold. It is
// not a kernel capability and has no composition; callers without it copy
// (CopyToHost, CopyFromHost).
type HostMemory interface {
	// HostFloat32s returns the host slice behind a Float32 buffer of this
	// backend, sharing its memory, and false for any other buffer.
	HostFloat32s(b Buffer) ([]float32, bool)
	// WrapFloat32s returns a Float32 buffer of this backend whose memory
	// is s itself (a kernel writing the buffer writes s).
	WrapFloat32s(s []float32) Buffer
}
