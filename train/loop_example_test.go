package train_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/tokenizer/bytelevel"
	"github.com/hilbert-ml/hilbert/train"
)

// ExampleLoop trains a byte-level GPT-2 on text held in memory with an
// optimizer recipe of its own, checkpoints it, and resumes it in a fresh
// loop. docs/writing-a-model.md quotes it (TestReadmeQuotesExampleLoop).
func ExampleLoop() {
	dev := cpu.New()
	text := strings.Repeat("the quick brown fox jumps over the lazy dog; ", 450)
	cfg, err := models.GPT2Preset("gpt2-tiny")
	if err != nil {
		log.Fatal(err)
	}
	cfg.Vocab, cfg.Context = bytelevel.VocabSize, 32
	newLoop := func() (*train.Loop[train.Tokens], error) {
		model, err := models.NewGPT2(dev, cfg, 1)
		if err != nil {
			return nil, err
		}
		opt, err := optim.NewSet(optim.Recipe{Groups: []optim.GroupSpec{
			{Name: "all", Match: func(string) bool { return true }, Config: optim.PaperAdamW(1e-2), Required: true},
		}}, model.Parameters())
		if err != nil {
			return nil, err
		}
		data, err := train.NewWindows(bytelevel.Encode(text), 8, 32, 0)
		if err != nil {
			return nil, err
		}
		sched, err := optim.NewCosine(40, 4)
		if err != nil {
			return nil, err
		}
		return train.NewLoop(dev, train.LM(dev, model), train.Source[train.Tokens](data), opt,
			train.LoopConfig{Accumulate: 2, ClipNorm: 1, Schedule: sched})
	}

	loop, err := newLoop()
	if err != nil {
		log.Fatal(err)
	}
	var first, last float64
	err = loop.Run(context.Background(), 20, func(u train.Update) error {
		if u.Step == 1 {
			first = u.Loss
		}
		last = u.Loss
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "hilbert-loop")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := loop.Save(filepath.Join(dir, "checkpoints")); err != nil {
		log.Fatal(err)
	}

	resumed, err := newLoop()
	if err != nil {
		log.Fatal(err)
	}
	if err := resumed.Load(filepath.Join(dir, "checkpoints")); err != nil {
		log.Fatal(err)
	}
	if err := resumed.Run(context.Background(), 40, nil); err != nil {
		log.Fatal(err)
	}
	fmt.Println("loss fell by more than half:", last < first/2)
	fmt.Println("resumed at update 20, now at", resumed.Step())
	// Output:
	// loss fell by more than half: true
	// resumed at update 20, now at 40
}
