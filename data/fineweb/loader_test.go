package fineweb

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
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
	if _, err := Validation(paths[0], 101, 8, 2); err == nil {
		t.Error("Validation accepted nTokens without the last target")
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
