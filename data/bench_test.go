package data

import (
	"context"
	"hash/crc32"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/internal/testcorpus"
)

// BenchmarkBuildParquet measures ingestion MB/s (text bytes) from a Parquet
// file of Austen's paragraphs to shards:
//
//	go test ./data -run '^$' -bench . -benchtime 3x
func BenchmarkBuildParquet(b *testing.B) {
	text := testcorpus.Text(b, "austen.txt.gz")
	var docs []*string
	for _, p := range strings.SplitAfter(text, "\n\n\n") {
		docs = append(docs, &p)
	}
	path := filepath.Join(b.TempDir(), "austen.parquet")
	writeParquet(b, path, false, docs)
	out := b.TempDir()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := BuildFromFiles(context.Background(), BuildConfig{Dir: out, Overwrite: true}, path); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildText measures ingestion MB/s of the streaming text path.
func BenchmarkBuildText(b *testing.B) {
	path := filepath.Join(testcorpus.Dir(b), "austen.txt.gz")
	out := b.TempDir()
	b.SetBytes(4025029)
	for b.Loop() {
		if _, err := BuildFromFiles(context.Background(), BuildConfig{Dir: out, Overwrite: true}, path); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenShard measures OpenShard on a 100 MB shard (50M tokens)
// in the page cache: one pass that checks every token against the
// vocabulary and computes the CRC-32C the manifest is checked against.
// BenchmarkShardCRC32C is the checksum's share of that pass.
//
//	go test ./data -run '^$' -bench 'OpenShard|CRC32C' -benchtime 5x
func BenchmarkOpenShard(b *testing.B) {
	p := bigShard(b)
	b.SetBytes(HeaderBytes + 2*50<<20)
	for b.Loop() {
		s, err := OpenShard(p, 50257)
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}

func BenchmarkShardCRC32C(b *testing.B) {
	buf := make([]byte, 2*50<<20)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		crc32.Update(0, castagnoli, buf)
	}
}

func bigShard(b *testing.B) string {
	toks := make([]int32, 50<<20)
	for i := range toks {
		toks[i] = int32(i % 50257)
	}
	p := filepath.Join(b.TempDir(), "big.bin")
	if err := WriteShard(p, toks, false); err != nil {
		b.Fatal(err)
	}
	return p
}
