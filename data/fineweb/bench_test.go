package fineweb

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/internal/testcorpus"
)

// BenchmarkBuildParquet measures ingestion MB/s (text bytes) from a Parquet
// file of Austen's paragraphs to shards:
//
//	go test ./data/fineweb -run '^$' -bench . -benchtime 3x
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
