package safetensors

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse runs Open's header checks on arbitrary bytes and reads every
// tensor of a header they accept: an error naming the file, never a
// panic. What is accepted tiles the data section exactly, and every
// tensor reads back (or fails its checksum, naming the tensor). The seeds
// are files Save wrote, whole and cut, so `go test` runs them as tests.
func FuzzParse(f *testing.F) {
	dir := f.TempDir()
	for i, c := range []struct {
		tensors []Tensor
		meta    map[string]string
	}{
		{[]Tensor{{Name: "w", DType: F32, Shape: []int{2, 3}, Data: EncodeFloat32([]float32{1, -2, 3.5, 0, 1e-30, -7})}}, nil},
		{[]Tensor{
			{Name: "b.weight", DType: F32, Shape: []int{2}, Data: EncodeFloat32([]float32{1, 2})},
			{Name: "a.ids", DType: I32, Shape: []int{3}, Data: EncodeInt32([]int32{3, -1, 7})},
			{Name: "empty", DType: F32, Shape: []int{0, 4}},
			{Name: "scalar", DType: F32, Shape: []int{}, Data: EncodeFloat32([]float32{9})},
		}, map[string]string{"step": "12", "format": "hilbert-checkpoint"}},
		{nil, map[string]string{"only": "metadata"}},
	} {
		p := filepath.Join(dir, string(rune('a'+i))+".safetensors")
		if err := Save(p, c.tensors, c.meta); err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-1])
		flipped := bytes.Clone(b)
		flipped[len(b)-1] ^= 1
		f.Add(flipped)
	}
	f.Add([]byte{})
	f.Add([]byte("\x02\x00\x00\x00\x00\x00\x00\x00{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		const name = "fuzz.safetensors"
		sf, err := parse(name, bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "safetensors: "+name+": ") {
				t.Fatalf("the error does not name the file: %v", err)
			}
			return
		}
		sf.r = bytes.NewReader(data)
		defer sf.Close()
		if want := 8 + int64(binary.LittleEndian.Uint64(data)); sf.dataStart != want {
			t.Fatalf("data start %d, want %d", sf.dataStart, want)
		}
		var pos int64
		for _, in := range sf.Tensors() {
			if in.Begin != pos || in.End < in.Begin {
				t.Fatalf("tensor %q: [%d, %d] after byte %d", in.Name, in.Begin, in.End, pos)
			}
			pos = in.End
			if got, ok := sf.Info(in.Name); !ok || got.Begin != in.Begin {
				t.Fatalf("Info(%q) = %+v, %v", in.Name, got, ok)
			}
			buf := make([]byte, in.End-in.Begin)
			err := sf.ReadBytes(in.Name, buf)
			if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("tensor %q is damaged", in.Name)) {
				t.Fatalf("tensor %q: %v", in.Name, err)
			}
			if in.DType == F32 || in.DType == I32 {
				if n := in.Numel(); int64(4*n) != in.End-in.Begin {
					t.Fatalf("tensor %q: %d elements in %d bytes", in.Name, n, in.End-in.Begin)
				}
				dst := make([]float32, in.Numel())
				if e := sf.ReadFloat32(in.Name, in.Shape, dst); (e == nil) != (err == nil && in.DType == F32) {
					t.Fatalf("tensor %q (%s): ReadFloat32: %v after ReadBytes: %v", in.Name, in.DType, e, err)
				}
			}
		}
		if pos != int64(len(data))-sf.dataStart {
			t.Fatalf("the tensors end at byte %d of %d of data", pos, int64(len(data))-sf.dataStart)
		}
	})
}
