package data

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func u16(tokens []int32) []uint16 {
	out := make([]uint16, len(tokens))
	for i, t := range tokens {
		out[i] = uint16(t)
	}
	return out
}

func TestShardRoundTrip(t *testing.T) {
	dir := t.TempDir()
	tests := [][]int32{nil, {50256}, {0, 1, 2, 65535}, make([]int32, 10000)}
	for i, toks := range tests {
		p := filepath.Join(dir, "s.bin")
		if err := WriteShard(p, toks, true); err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(p)
		if st.Size() != HeaderBytes+2*int64(len(toks)) {
			t.Errorf("case %d: size %d", i, st.Size())
		}
		s, err := OpenShard(p, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.Tokens(); err != nil || !slices.Equal(got, u16(toks)) {
			t.Errorf("case %d: tokens differ", i)
		}
		s.Close()
	}
	if err := WriteShard(filepath.Join(dir, "s.bin"), nil, false); !errors.Is(err, os.ErrExist) {
		t.Errorf("overwrite without permission: got %v", err)
	}
	if err := WriteShard(filepath.Join(dir, "bad.bin"), []int32{70000}, false); err == nil {
		t.Error("token 70000 accepted")
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*"))
	if _, err := os.Stat(filepath.Join(dir, "bad.bin")); err == nil || len(left) > 0 {
		t.Errorf("failed write left files behind: %v", left)
	}
}

func header(magic, version, count int32) []byte {
	b := make([]byte, HeaderBytes)
	binary.LittleEndian.PutUint32(b[0:], uint32(magic))
	binary.LittleEndian.PutUint32(b[4:], uint32(version))
	binary.LittleEndian.PutUint32(b[8:], uint32(count))
	return b
}

func TestOpenShardRejects(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name  string
		data  []byte
		vocab int
		want  string
	}{
		{"short", []byte{1, 2, 3}, 0, "size"},
		{"magic", header(1234, 1, 0), 0, "magic: expected 20240520, got 1234"},
		{"version", header(Magic, 2, 0), 0, "version: expected 1, got 2"},
		{"negative", header(Magic, 1, -5), 0, "token count"},
		{"huge", header(Magic, 1, 1<<30), 0, "size: expected"},
		{"truncated", append(header(Magic, 1, 3), 1, 0, 2, 0), 0, "size: expected 1030"},
		{"vocab", append(header(Magic, 1, 2), 1, 0, 0x51, 0xc4), 50257, "token 1: expected id below vocab size 50257, got 50257"},
	}
	for _, tc := range tests {
		p := filepath.Join(dir, tc.name+".bin")
		os.WriteFile(p, tc.data, 0o644)
		s, err := OpenShard(p, tc.vocab)
		if err == nil {
			s.Close()
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %q should name the file and contain %q", tc.name, err, tc.want)
		}
	}
}

// FuzzOpenShard feeds hostile shards to the reader: it must not panic nor
// allocate by the header's word, and what it accepts must be a
// well-formed shard. The checks run on memory (readShard, OpenShard's
// body) so that an input costs microseconds, not a file's syscalls; the
// seeds also go through OpenShard and a file. Run for longer with:
//
//	go test ./data -run '^$' -fuzz FuzzOpenShard -fuzztime 5m -fuzzminimizetime 10s
func FuzzOpenShard(f *testing.F) {
	f.Add(header(Magic, 1, 0))
	f.Add(append(header(Magic, 1, 1), 0x51, 0xc4))
	f.Add(append(header(Magic, 1, 2), 0x50, 0xc4, 1, 0))
	f.Add(header(Magic, 1, 1<<30))
	f.Add(header(Magic, 1, -1))
	f.Add([]byte("garbage"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := readShard("fuzz.bin", bytes.NewReader(data), int64(len(data)), 50257)
		p := filepath.Join(dir, "fuzz.bin")
		if !fuzzing() { // the seeds also through a file: OpenShard agrees
			os.WriteFile(p, data, 0o644)
			fs, ferr := OpenShard(p, 50257)
			if (ferr == nil) != (err == nil) {
				t.Fatalf("OpenShard: %v, readShard: %v", ferr, err)
			}
			if ferr == nil {
				fs.Close()
			}
		}
		if err != nil {
			return
		}
		defer s.Close()
		if HeaderBytes+2*s.Len() != len(data) {
			t.Fatalf("accepted %d tokens in %d bytes", s.Len(), len(data))
		}
		toks, err := s.Tokens()
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range toks {
			if tok >= 50257 {
				t.Fatalf("accepted token %d", tok)
			}
		}
		if s.Checksum() != crc32.Checksum(data[HeaderBytes:], crc32.MakeTable(crc32.Castagnoli)) {
			t.Fatal("checksum differs from the CRC-32C of the token bytes")
		}
	})
}

// fuzzing reports whether the test binary runs with -test.fuzz.
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

// Verify notices a shard written over in place while open (same size,
// other tokens), and one whose size changed; a file only touched, or not
// touched at all, passes.
func TestShardVerify(t *testing.T) {
	tokens := make([]int32, 5000)
	for i := range tokens {
		tokens[i] = int32(i % 300)
	}
	later := time.Now().Add(time.Hour)
	for _, c := range []struct {
		name   string
		change func(path string)
		want   string
	}{
		{"untouched", func(string) {}, ""},
		{"touched", func(p string) { os.Chtimes(p, later, later) }, ""},
		{"written over in place", func(p string) {
			f, _ := os.OpenFile(p, os.O_WRONLY, 0)
			f.WriteAt([]byte{7, 7, 7, 7}, HeaderBytes+2*1234)
			f.Close()
			os.Chtimes(p, later, later) // as the write would, past the clock's granularity
		}, "changed while in use: its tokens' CRC-32C is now"},
		{"grown", func(p string) {
			f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			f.Write([]byte{1, 0})
			f.Close()
		}, "changed while in use: 11026 bytes, it held 11024"},
	} {
		path := filepath.Join(t.TempDir(), "s.bin")
		if err := WriteShard(path, tokens, false); err != nil {
			t.Fatal(err)
		}
		s, err := OpenShard(path, 300)
		if err != nil {
			t.Fatal(err)
		}
		c.change(path)
		err = s.Verify()
		if (c.want == "") != (err == nil) || err != nil && (!strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path)) {
			t.Errorf("%s: Verify: %v, want %q", c.name, err, c.want)
		}
		if c.want == "" {
			if err := s.Verify(); err != nil {
				t.Errorf("%s: second Verify: %v", c.name, err)
			}
		}
		s.Close()
	}
}
