package cuda

import (
	"strings"
	"testing"
	"unsafe"
)

// goString reads strings from Go memory too (cuDeviceGetName fills a Go
// array); under go test -race, checkptr aborted the old nil-based walk.
func TestGoString(t *testing.T) {
	var name [256]byte
	copy(name[:], "NVIDIA H200\x00junk")
	if got := goString(uintptr(unsafe.Pointer(&name[0]))); got != "NVIDIA H200" {
		t.Errorf("goString = %q, expected %q", got, "NVIDIA H200")
	}
	heap := []byte(strings.Repeat("x", 100) + "\x00")
	if got := goString(uintptr(unsafe.Pointer(&heap[0]))); got != strings.Repeat("x", 100) {
		t.Errorf("goString of a heap string = %q", got)
	}
	if goString(0) != "" {
		t.Error("goString(0) is not empty")
	}
}
