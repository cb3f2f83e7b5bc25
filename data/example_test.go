package data_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hilbert-ml/hilbert/data"
)

func ExampleWriteShard() {
	dir, _ := os.MkdirTemp("", "shards")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "fineweb_train_000000.bin")
	if err := data.WriteShard(path, []int32{50256, 15496, 995}, false); err != nil {
		panic(err)
	}
	s, err := data.OpenShard(path, 50257)
	if err != nil {
		panic(err)
	}
	defer s.Close()
	toks, err := s.Tokens()
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Len(), toks)
	// Output: 3 [50256 15496 995]
}

func ExampleNewLoader() {
	dir, _ := os.MkdirTemp("", "shards")
	defer os.RemoveAll(dir)
	toks := make([]int32, 33) // 4 sequences of T=8 (+1 token for the last target)
	for i := range toks {
		toks[i] = int32(i)
	}
	path := filepath.Join(dir, "fineweb_train_000000.bin")
	if err := data.WriteShard(path, toks, false); err != nil {
		panic(err)
	}
	l, err := data.NewLoader(data.LoaderConfig{Shards: []string{path}, SeqLen: 8, MicroBatch: 2, BatchSeqs: 2, Seed: 1})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	in, tg := make([]int32, 2*8), make([]int32, 2*8)
	saved := l.Cursor() // store with a checkpoint
	l.Next(in, tg)
	fmt.Println(in[:8], tg[:8])
	l.Restore(saved) // a resumed run sees the same batch
	in2, tg2 := make([]int32, 2*8), make([]int32, 2*8)
	l.Next(in2, tg2)
	fmt.Println(in2[0] == in[0], l.Cursor())
	// Output:
	// [0 1 2 3 4 5 6 7] [1 2 3 4 5 6 7 8]
	// true {0 0 1 0}
}
