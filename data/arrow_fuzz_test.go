package data

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// fuzzInput writes data as name in dir and ingests it with a builder
// into dir/out, which it then aborts: an error naming the file, never a
// panic. It returns the error. The shards are large enough that none is
// finished (each finished shard is synced to disk, which would slow the
// fuzzing to a few inputs a second).
func fuzzInput(t *testing.T, dir, name, column string, data []byte) error {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := NewBuilder(BuildConfig{Dir: filepath.Join(dir, "out"), ShardTokens: 1 << 20, Split: Split{ValEvery: 3}, Column: column, BatchRows: 2, Overwrite: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Abort()
	err = b.AddFile(context.Background(), path)
	if err != nil && !strings.Contains(err.Error(), path) {
		t.Fatalf("the error does not name the file: %v", err)
	}
	return err
}

// FuzzParquet ingests arbitrary bytes as a Parquet file (the text column):
// errors, never a panic. The seeds are files the build tests write, whole,
// cut and with a flipped byte, so `go test` runs them as tests.
func FuzzParquet(f *testing.F) {
	p := filepath.Join(f.TempDir(), "a.parquet")
	writeParquet(f, p, false, testDocs())
	addVariants(f, p)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) { fuzzInput(t, dir, "in.parquet", "text", data) })
}

// FuzzArrow ingests arbitrary bytes as an Arrow IPC file or stream (the
// text column): errors, never a panic or a fatal out-of-memory error.
// arrow-go (v18.8.0) does not verify an IPC message's flatbuffer before it
// allocates from the vector lengths it holds (a few flipped bytes of a
// schema made it ask for tens of GB: schemaFromFB's make([]arrow.Field,
// n)), so AddArrow checks every flatbuffer, block and body length first
// (arrowcheck.go). The seeds are files and streams of strings, large
// strings, string views and token lists (LZ4 and ZSTD compressed too),
// and of a text column next to dictionary-encoded, struct and union ones,
// whole, cut and with a flipped byte; testdata holds what it found. Fuzz it under a memory cap (ulimit -v), so that an
// allocation the checks miss shows as a crash.
func FuzzArrow(f *testing.F) {
	docs := testDocs()
	half := len(docs) / 2
	in := f.TempDir()
	for i, c := range []struct {
		stream bool
		opts   []ipc.Option
		cols   func() []arrow.Array
	}{
		{true, nil, func() []arrow.Array {
			return []arrow.Array{stringColumn(false, docs[:half]), stringColumn(false, docs[half:])}
		}},
		{false, nil, func() []arrow.Array {
			return []arrow.Array{stringColumn(true, docs[:half]), stringColumn(true, docs[half:])}
		}},
		{false, nil, func() []arrow.Array {
			return []arrow.Array{tokenListColumn(f, docs[:half]), tokenListColumn(f, docs[half:])}
		}},
		{true, []ipc.Option{ipc.WithLZ4()}, func() []arrow.Array { return []arrow.Array{tokenListColumn(f, docs)} }},
		{false, []ipc.Option{ipc.WithZstd()}, func() []arrow.Array { return []arrow.Array{stringColumn(false, docs)} }},
	} {
		p := filepath.Join(in, fmt.Sprintf("%d.arrow", i))
		writeArrowWith(f, p, c.stream, "text", c.opts, c.cols()...)
		addVariants(f, p)
	}
	for i, stream := range []bool{false, true} {
		p := filepath.Join(in, fmt.Sprintf("mixed%d.arrow", i))
		writeArrowMixed(f, p, stream, docs)
		addVariants(f, p)
	}
	p := filepath.Join(in, "view.arrow")
	writeArrowWith(f, p, true, "text", nil, stringViewColumn(docs))
	addVariants(f, p)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) { fuzzInput(t, dir, "in.arrow", "text", data) })
}

// addVariants adds the file at p to the seed corpus whole, cut in half,
// and with a byte in the middle flipped.
func addVariants(f *testing.F, p string) {
	b, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:len(b)/2])
	flipped := append([]byte(nil), b...)
	flipped[len(b)/2] ^= 0xff
	f.Add(flipped)
}
