package fineweb

import (
	"testing"

	"github.com/hilbert-ml/hilbert/internal/testcorpus"
)

// corpusDir returns the shared corpus folder (see testcorpus.Dir).
func corpusDir(t testing.TB) string {
	t.Helper()
	return testcorpus.Dir(t)
}

// readCorpusText returns the decompressed text of one corpus file.
func readCorpusText(t testing.TB, name string) string {
	t.Helper()
	return testcorpus.Text(t, name)
}
