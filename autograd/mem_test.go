package autograd

import "runtime"

type runtimeMem struct{ bytes, allocs uint64 }

func (m *runtimeMem) read() {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	m.bytes, m.allocs = s.TotalAlloc, s.Mallocs
}
