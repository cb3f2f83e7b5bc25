package train_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hilbert-ml/hilbert/data"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/train"
)

// Example trains a tiny model on two shards written on the spot, with a
// hook that watches every update (and update 0, the initial validation).
func Example() {
	dir, _ := os.MkdirTemp("", "hilbert-example")
	defer os.RemoveAll(dir)
	tokens := make([]int32, 2000)
	for i := range tokens {
		tokens[i] = int32(i * 3 % 50)
	}
	trainShard, valShard := filepath.Join(dir, "train.bin"), filepath.Join(dir, "val.bin")
	data.WriteShard(trainShard, tokens, false)
	data.WriteShard(valShard, tokens[:500], false)

	cfg := train.Config{
		Name: "example", RunsDir: filepath.Join(dir, "runs"),
		Model:       models.Config{Layers: 1, Dim: 64, HeadDim: 64, MLPHidden: 256, Vocab: 50, Context: 16, RoPEBase: 10000, InitStd: 0.02},
		Head:        "rownorm",
		TrainShards: []string{trainShard}, ValShard: valShard,
		SeqLen: 16, MicroBatch: 4, Steps: 3, ValTokens: 200,
	}
	tr, err := train.New(cpu.New(), cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()
	err = tr.Run(context.Background(), func(t *train.Trainer, r train.Record) error {
		fmt.Printf("update %d: validation %v, diameter %v\n", r.Step, r.ValLoss != nil, r.Diameter != nil)
		return nil
	})
	fmt.Println("error:", err)
	// Output:
	// update 0: validation true, diameter false
	// update 1: validation false, diameter false
	// update 2: validation false, diameter false
	// update 3: validation true, diameter true
	// error: <nil>
}
