package train_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/tokenizer/bytelevel"
	"github.com/hilbert-ml/hilbert/train"
)

// ExampleLoop trains a byte-level GPT-2 on text held in memory with an
// optimizer recipe of its own, checkpoints it, and resumes it in a fresh
// loop.
func ExampleLoop() {
	dev := cpu.New()
	text := "the quick brown fox jumps over the lazy dog; "
	for len(text) < 20_000 {
		text += text
	}
	cfg, _ := models.GPT2Preset("gpt2-tiny")
	cfg.Vocab, cfg.Context = bytelevel.VocabSize, 32
	newLoop := func() *train.Loop[train.Tokens] {
		model, _ := models.NewGPT2(dev, cfg, 1)
		opt, _ := optim.NewSet(optim.Recipe{Groups: []optim.GroupSpec{
			{Name: "all", Match: func(string) bool { return true }, Config: optim.PaperAdamW(1e-2), Required: true},
		}}, model.Parameters())
		data, _ := train.NewWindows(bytelevel.Encode(text), 8, 32, 0)
		sched, _ := optim.NewCosine(40, 4)
		loop, err := train.NewLoop(dev, train.LM(dev, model), train.Source[train.Tokens](data), opt,
			train.LoopConfig{Accumulate: 2, ClipNorm: 1, Schedule: sched})
		if err != nil {
			panic(err)
		}
		return loop
	}

	loop := newLoop()
	var first, last float64
	loop.Run(context.Background(), 20, func(u train.Update) error {
		if u.Step == 1 {
			first = u.Loss
		}
		last = u.Loss
		return nil
	})
	dir, _ := os.MkdirTemp("", "hilbert-loop")
	defer os.RemoveAll(dir)
	if err := loop.Save(filepath.Join(dir, "checkpoints")); err != nil {
		panic(err)
	}

	resumed := newLoop()
	if err := resumed.Load(filepath.Join(dir, "checkpoints")); err != nil {
		panic(err)
	}
	resumed.Run(context.Background(), 40, nil)
	fmt.Println("loss fell by more than half:", last < first/2)
	fmt.Println("resumed at update 20, now at", resumed.Step())
	// Output:
	// loss fell by more than half: true
	// resumed at update 20, now at 40
}
