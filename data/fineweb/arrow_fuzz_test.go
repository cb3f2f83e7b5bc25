package fineweb

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

// There is no FuzzArrow: arrow-go (v18.8.0) does not verify an IPC
// message's flatbuffer before it allocates from the vector lengths it
// holds, so a few flipped bytes of a schema make ipc.NewReader ask for
// tens of GB (schemaFromFB: make([]arrow.Field, n)), a fatal out-of-memory
// error that no recover catches. Fuzzing Arrow input needs that fixed in
// arrow-go, or a flatbuffer verifier in front of it, first.

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
