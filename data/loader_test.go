package data

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// makeShards writes shards whose token at position i is (shard*1000+i)%50000,
// so every sequence tells where it came from.
func makeShards(t testing.TB, sizes ...int) []string {
	dir := t.TempDir()
	var paths []string
	for s, n := range sizes {
		toks := make([]int32, n)
		for i := range toks {
			toks[i] = int32((s*1000 + i) % 50000)
		}
		p := filepath.Join(dir, fmt.Sprintf("train_%06d.bin", s))
		if err := WriteShard(p, toks, false); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// drain returns the first n micro-batches as inputs followed by targets.
func drain(t testing.TB, l *Loader, n int) [][]int32 {
	B, T := l.cfg.MicroBatch, l.cfg.SeqLen
	var out [][]int32
	for range n {
		in, tg := make([]int32, B*T), make([]int32, B*T)
		if err := l.Next(in, tg); err != nil {
			t.Fatal(err)
		}
		out = append(out, append(in, tg...))
	}
	return out
}

func TestLoaderCoversEachSequenceOncePerEpoch(t *testing.T) {
	// T=8; shard sizes give (n-1)/8 sequences: 12, 7, 25 -> with BatchSeqs 4:
	// 3, 1, 6 batches; leftovers dropped.
	for _, prefetch := range []int{-1, 0, 2} {
		paths := makeShards(t, 97, 60, 201)
		cfg := LoaderConfig{Shards: paths, SeqLen: 8, MicroBatch: 2, BatchSeqs: 4, Seed: 7, Prefetch: prefetch}
		l, err := NewLoader(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.BatchesPerEpoch(); got != 10 {
			t.Fatalf("BatchesPerEpoch = %d, expected 10", got)
		}
		seen := map[[2]int32]int{}
		for _, mb := range drain(t, l, 20) { // 10 batches * 2 micro-batches
			for b := 0; b < 2; b++ {
				in, tg := mb[b*8:(b+1)*8], mb[16+b*8:16+(b+1)*8]
				for i := 1; i < 8; i++ {
					if in[i] != in[i-1]+1 || tg[i-1] != in[i] {
						t.Fatalf("sequence not contiguous: %v %v", in, tg)
					}
				}
				seen[[2]int32{in[0] / 1000, in[0] % 1000}]++
			}
		}
		if len(seen) != 40 {
			t.Errorf("prefetch %d: saw %d distinct sequences, expected 40", prefetch, len(seen))
		}
		for k, n := range seen {
			if n != 1 || k[1]%8 != 0 {
				t.Errorf("sequence %v seen %d times", k, n)
			}
		}
		if c := l.Cursor(); c.Epoch != 1 || c.Shard != 0 || c.Batch != 0 || c.Micro != 0 {
			t.Errorf("cursor after one epoch: %+v", c)
		}
		l.Close()
	}
}

func TestLoaderDeterministicAndResumable(t *testing.T) {
	paths := makeShards(t, 300, 500, 90, 410)
	cfg := LoaderConfig{Shards: paths, SeqLen: 4, MicroBatch: 3, BatchSeqs: 6, Seed: 42}
	a, _ := NewLoader(cfg)
	defer a.Close()
	all := drain(t, a, 200) // several epochs
	b, _ := NewLoader(cfg)
	defer b.Close()
	first := drain(t, b, 77)
	saved, _ := json.Marshal(b.Cursor())
	var c Cursor
	if err := json.Unmarshal(saved, &c); err != nil {
		t.Fatal(err)
	}
	noPrefetch := cfg
	noPrefetch.Prefetch = -1
	r, _ := NewLoader(noPrefetch)
	defer r.Close()
	if err := r.Restore(c); err != nil {
		t.Fatal(err)
	}
	rest := drain(t, r, 123)
	if !slices.EqualFunc(all, append(first, rest...), slices.Equal) {
		t.Fatal("resumed run differs from an uninterrupted one")
	}
	// Restore on a loader that has prefetched ahead.
	if err := b.Restore(Cursor{}); err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(all[:10], drain(t, b, 10), slices.Equal) {
		t.Fatal("restore to the start differs")
	}
	other := cfg
	other.Seed = 43
	o, _ := NewLoader(other)
	defer o.Close()
	if slices.EqualFunc(all[:40], drain(t, o, 40), slices.Equal) {
		t.Error("a different seed gave the same order")
	}
	if err := b.Restore(Cursor{Shard: 9}); err == nil {
		t.Error("restore accepted a bad cursor")
	}
}

func TestLoaderConfigErrors(t *testing.T) {
	paths := makeShards(t, 20)
	tests := []LoaderConfig{
		{},
		{Shards: paths, SeqLen: 0, MicroBatch: 1},
		{Shards: paths, SeqLen: 4, MicroBatch: 0},
		{Shards: paths, SeqLen: 4, MicroBatch: 2, BatchSeqs: 3},
		{Shards: paths, SeqLen: 64, MicroBatch: 1},                       // no batch fits
		{Shards: []string{"/nonexistent.bin"}, SeqLen: 4, MicroBatch: 1}, // missing
	}
	for i, cfg := range tests {
		if l, err := NewLoader(cfg); err == nil {
			l.Close()
			t.Errorf("case %d: accepted %+v", i, cfg)
		}
	}
}

func TestValidation(t *testing.T) {
	paths := makeShards(t, 101)
	v, err := Validation(paths[0], 40, 8, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	in, tg := make([]int32, 16), make([]int32, 16)
	var got []int32
	for {
		n, err := v.Next(in, tg)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for b := 0; b < n; b++ {
			if tg[b*8+7] != in[b*8]+8 {
				t.Fatalf("targets not shifted: %v %v", in, tg)
			}
		}
		got = append(got, in[:n*8]...)
	}
	want := make([]int32, 40)
	for i := range want {
		want[i] = int32(i)
	}
	if !slices.Equal(got, want) {
		t.Errorf("validation inputs %v, expected %v", got, want)
	}
	// A prefix the shard cannot hold (the last target is token nTokens) is
	// cut to the shard's 101-1 tokens, and says so.
	for _, n := range []int{100, 101, 200000} {
		v, err := Validation(paths[0], n, 8, 2)
		if err != nil {
			t.Fatalf("nTokens %d: %v", n, err)
		}
		if v.Tokens() != 100 || v.Sequences() != 12 || v.Cut() != (n > 100) {
			t.Errorf("nTokens %d: Tokens %d, Sequences %d, Cut %v; expected 100, 12, %v", n, v.Tokens(), v.Sequences(), v.Cut(), n > 100)
		}
		v.Close()
	}
	if _, err := Validation(paths[0], 40, 101, 2); err == nil || !strings.Contains(err.Error(), "expected at least 102 (T+1) for one sequence, got 101") {
		t.Errorf("a shard shorter than one sequence: %v", err)
	}
}

// BenchmarkLoader measures micro-batches per second at GPT-2 small's shape
// (B=8, T=1024) from a 16M-token shard.
func BenchmarkLoader(b *testing.B) {
	paths := makeShards(b, 16<<20)
	l, err := NewLoader(LoaderConfig{Shards: paths, SeqLen: 1024, MicroBatch: 8, BatchSeqs: 64, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	in, tg := make([]int32, 8*1024), make([]int32, 8*1024)
	for b.Loop() {
		l.Next(in, tg)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "batches/s")
}

// BenchmarkLoaderNoPrefetch measures reading alone, on the caller's
// goroutine: one pread of B*T+1 tokens and the widening to int32 per
// micro-batch.
func BenchmarkLoaderNoPrefetch(b *testing.B) {
	paths := makeShards(b, 16<<20)
	l, err := NewLoader(LoaderConfig{Shards: paths, SeqLen: 1024, MicroBatch: 8, BatchSeqs: 64, Seed: 1, Prefetch: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	in, tg := make([]int32, 8*1024), make([]int32, 8*1024)
	b.SetBytes(8 * 1025 * 2)
	for b.Loop() {
		l.Next(in, tg)
	}
}

// A shard truncated while a loader reads it is an error naming the file
// (with memory mapping it was SIGBUS, which kills the process).
func TestLoaderTruncatedShard(t *testing.T) {
	for _, prefetch := range []int{-1, 2} {
		paths := makeShards(t, 4097)
		l, err := NewLoader(LoaderConfig{Shards: paths, SeqLen: 16, MicroBatch: 2, BatchSeqs: 4, Seed: 1, Prefetch: prefetch})
		if err != nil {
			t.Fatal(err)
		}
		v, err := Validation(paths[0], 0, 16, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(paths[0], HeaderBytes+100); err != nil {
			t.Fatal(err)
		}
		in, tg := make([]int32, 32), make([]int32, 32)
		for i := 0; ; i++ {
			err := l.Next(in, tg)
			if err == nil && i < 200 {
				continue
			}
			if err == nil || !strings.Contains(err.Error(), "truncated while in use") || !strings.Contains(err.Error(), paths[0]) {
				t.Errorf("prefetch %d: Next after truncation: %v", prefetch, err)
			}
			if again := l.Next(in, tg); again == nil {
				t.Errorf("prefetch %d: Next after the error succeeded", prefetch)
			}
			break
		}
		for i := 0; ; i++ {
			_, err := v.Next(in, tg)
			if err == nil && i < 200 {
				continue
			}
			if err == nil || !strings.Contains(err.Error(), "truncated while in use") {
				t.Errorf("validation after truncation: %v", err)
			}
			break
		}
		// Restore clears the error; the shard is still short.
		if err := l.Restore(Cursor{}); err != nil {
			t.Fatal(err)
		}
		if err := l.Next(in, tg); err != nil && !strings.Contains(err.Error(), "truncated") {
			t.Errorf("after Restore: %v", err)
		}
		l.Close()
		v.Close()
	}
}

// Restore straight after NewLoader, while the prefetcher is filling its
// first batches, must not share the permutation cache with it (go test
// -race caught Restore reading the shard order the prefetcher wrote).
func TestLoaderRestoreWhilePrefetching(t *testing.T) {
	paths := makeShards(t, 300, 500, 90, 410)
	cfg := LoaderConfig{Shards: paths, SeqLen: 4, MicroBatch: 3, BatchSeqs: 6, Seed: 42}
	for _, c := range []Cursor{{Epoch: 1, Shard: 2, Batch: 1, Micro: 1}, {Epoch: 0, Shard: 1}} {
		l, err := NewLoader(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Restore(c); err != nil {
			t.Fatal(err)
		}
		got := drain(t, l, 5)
		// The same batches from a loader that reads up to c.
		r, _ := NewLoader(cfg)
		for r.Cursor() != c {
			drain(t, r, 1)
		}
		if want := drain(t, r, 5); !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("restore to %+v: batches differ from an uninterrupted loader's", c)
		}
		r.Close()
		l.Close()
	}
}
