package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.safetensors")
	a := []float32{1, -2, 3.5, 0, 1e-30, -7}
	ids := []int32{3, -1, 7}
	err := Save(path, []Tensor{
		{Name: "b.weight", DType: F32, Shape: []int{2, 3}, Data: EncodeFloat32(a)},
		{Name: "a.ids", DType: I32, Shape: []int{3}, Data: EncodeInt32(ids)},
		{Name: "empty", DType: F32, Shape: []int{0, 4}, Data: nil},
		{Name: "scalar", DType: F32, Shape: []int{}, Data: EncodeFloat32([]float32{9})},
	}, map[string]string{"step": "12"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Metadata()["step"] != "12" {
		t.Errorf("metadata %v", f.Metadata())
	}
	got := make([]float32, 6)
	if err := f.ReadFloat32("b.weight", []int{2, 3}, got); err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if got[i] != a[i] {
			t.Fatalf("b.weight = %v, want %v", got, a)
		}
	}
	gi := make([]int32, 3)
	if err := f.ReadInt32("a.ids", []int{3}, gi); err != nil {
		t.Fatal(err)
	}
	if gi[1] != -1 || gi[2] != 7 {
		t.Errorf("a.ids = %v", gi)
	}
	s := make([]float32, 1)
	if err := f.ReadFloat32("scalar", []int{}, s); err != nil || s[0] != 9 {
		t.Errorf("scalar = %v, %v", s, err)
	}
	// Checks against the expected dtype and shape name the tensor.
	if err := f.ReadFloat32("b.weight", []int{3, 2}, got); err == nil || !strings.Contains(err.Error(), `"b.weight"`) {
		t.Errorf("shape mismatch error %v", err)
	}
	if err := f.ReadFloat32("a.ids", []int{3}, got[:3]); err == nil || !strings.Contains(err.Error(), "dtype I32") {
		t.Errorf("dtype mismatch error %v", err)
	}
	if err := f.ReadFloat32("missing", nil, got); err == nil || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("missing tensor error %v", err)
	}
	// Header length is 8-aligned.
	raw, _ := os.ReadFile(path)
	if n := binary.LittleEndian.Uint64(raw); n%8 != 0 {
		t.Errorf("header length %d not aligned", n)
	}
}

// file builds raw file bytes from a header string and a data length.
func file(header string, data int) []byte {
	b := make([]byte, 8, 8+len(header)+data)
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, data)...)
}

func TestUntrusted(t *testing.T) {
	huge := make([]byte, 8)
	binary.LittleEndian.PutUint64(huge, MaxHeaderBytes+1)
	past := make([]byte, 16)
	binary.LittleEndian.PutUint64(past, 1000)
	cases := []struct {
		name string
		raw  []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "too short"},
		{"huge header", huge, "exceeds the limit"},
		{"header past end", past, "past the end"},
		{"not an object", file(`[1,2]`, 0), "not a JSON object"},
		{"bad json", file(`{"a":`, 0), `tensor "a": EOF`},
		{"unknown dtype", file(`{"w":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}}`, 1), `"w": unknown dtype`},
		{"size mismatch", file(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 4), `"w": F32 [2] needs 8 bytes`},
		{"negative dim", file(`{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, 4), `"w": invalid shape`},
		{"overflow", file(`{"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,4]}}`, 4), `"w": invalid shape`},
		{"reversed offsets", file(`{"w":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`, 4), `"w": invalid data_offsets`},
		{"one offset", file(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[4]}}`, 4), `"w": data_offsets`},
		{"past end", file(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4), `"w": data_offsets [0, 8] run past the end`},
		{"overlap", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8), `"b": data_offsets [4, 8] overlap`},
		{"gap", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8), `"a": data_offsets [4, 8] leave a gap`},
		{"trailing data", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 8), "4 bytes of data after"},
		{"duplicate", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8), `"a" appears twice`},
		{"bad metadata", file(`{"__metadata__":{"k":1}}`, 0), "__metadata__"},
		{"trailing json", file(`{}{}`, 0), "trailing"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
			if err := os.WriteFile(path, c.raw, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := Open(path)
			if err == nil {
				f.Close()
				t.Fatalf("Open accepted a bad file")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not mention %q and the path", err, c.want)
			}
		})
	}
}

func TestWriterChecks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		tensors []Tensor
		want    string
	}{
		{"duplicate", []Tensor{{Name: "a", DType: F32, Shape: []int{1}, Data: make([]byte, 4)}, {Name: "a", DType: F32, Shape: []int{1}, Data: make([]byte, 4)}}, "twice"},
		{"short data", []Tensor{{Name: "a", DType: F32, Shape: []int{2}, Data: make([]byte, 4)}}, `"a": 4 bytes`},
		{"bad dtype", []Tensor{{Name: "a", DType: "X", Shape: []int{1}}}, "unknown dtype"},
		{"reserved", []Tensor{{Name: metadataKey, DType: F32, Shape: []int{0}}}, "reserved"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Save(path, c.tensors, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
	// A failed save leaves the old file and no temporary files.
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("target changed to %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %d entries, want 1", len(ents))
	}
}

// rawHeader returns a file's JSON header.
func rawHeader(t *testing.T, path string) map[string]json.RawMessage {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(data)
	var h map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &h); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestChecksums(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.safetensors")
	a, b := EncodeFloat32([]float32{1, 2, 3, 4}), EncodeInt32([]int32{5, 6})
	if err := Save(path, []Tensor{
		{Name: "a", DType: F32, Shape: []int{4}, Data: a},
		{Name: "empty", DType: F32, Shape: []int{0}},
		{Name: "b", DType: I32, Shape: []int{2}, Data: b},
	}, nil); err != nil {
		t.Fatal(err)
	}
	// The header records CRC-32C of each tensor's bytes in file order.
	var meta map[string]string
	json.Unmarshal(rawHeader(t, path)["__metadata__"], &meta)
	tab := crc32.MakeTable(crc32.Castagnoli)
	want := fmt.Sprintf("%08x,%08x,%08x", crc32.Checksum(a, tab), crc32.Checksum(nil, tab), crc32.Checksum(b, tab))
	if meta[ChecksumKey] != want {
		t.Fatalf("metadata %v, expected %s = %s", meta, ChecksumKey, want)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata() != nil {
		t.Errorf("Metadata() = %v, expected nil (the checksums are hidden)", f.Metadata())
	}
	f.Close()

	// A flipped bit in tensor b's data: b fails, naming it and the file;
	// a still reads.
	data, _ := os.ReadFile(path)
	data[len(data)-3] ^= 0x10
	bad := filepath.Join(dir, "bad.safetensors")
	os.WriteFile(bad, data, 0o644)
	f, err = Open(bad)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.ReadInt32("b", []int{2}, make([]int32, 2)); err == nil || !strings.Contains(err.Error(), `tensor "b" is damaged`) || !strings.Contains(err.Error(), bad) {
		t.Errorf("damaged tensor: %v", err)
	}
	if err := f.ReadFloat32("a", []int{4}, make([]float32, 4)); err != nil {
		t.Errorf("intact tensor: %v", err)
	}

	// The key is reserved for the writer.
	if err := Save(filepath.Join(dir, "r.safetensors"), nil, map[string]string{ChecksumKey: "x"}); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("reserved key accepted: %v", err)
	}
}

// Files written elsewhere have no checksums and load; a malformed list is
// an error.
func TestChecksumsAbsentOrMalformed(t *testing.T) {
	dir := t.TempDir()
	write := func(name, header string, data []byte) string {
		for len(header)%8 != 0 {
			header += " "
		}
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
		p := filepath.Join(dir, name)
		os.WriteFile(p, append(append(b, header...), data...), 0o644)
		return p
	}
	data := EncodeFloat32([]float32{1, 2})
	tensor := `"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`
	torch := write("torch.safetensors", `{"__metadata__":{"format":"pt"},`+tensor+`}`, data)
	f, err := Open(torch)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 2)
	if err := f.ReadFloat32("w", []int{2}, got); err != nil || got[1] != 2 || f.Metadata()["format"] != "pt" {
		t.Errorf("a file without checksums: %v %v %v", got, err, f.Metadata())
	}
	f.Close()
	for name, sums := range map[string]string{"count": "00000000,00000000", "digits": "123", "hex": "zzzzzzzz"} {
		p := write(name+".safetensors", `{"__metadata__":{"`+ChecksumKey+`":"`+sums+`"},`+tensor+`}`, data)
		if f, err := Open(p); err == nil {
			f.Close()
			t.Errorf("%s: checksums %q accepted", name, sums)
		} else if !strings.Contains(err.Error(), ChecksumKey) {
			t.Errorf("%s: %v should name %s", name, err, ChecksumKey)
		}
	}
}

// A Writer commits once: a second Commit, or a tensor written after it,
// is an error naming the file, and the committed file stands.
func TestWriterCommitOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "once.safetensors")
	w, err := Create(path, []Info{{Name: "a", DType: F32, Shape: []int{1}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTensor("a", make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("second Commit: %v, want an error naming %s", err, path)
	}
	if err := w.WriteTensor("a", make([]byte, 4)); err == nil {
		t.Error("WriteTensor after Commit: no error")
	}
	f, err := Open(path)
	if err != nil {
		t.Fatalf("the committed file: %v", err)
	}
	f.Close()
}
