package hf

import (
	"path/filepath"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/models/registry"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/safetensors"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestFineTune is the library path of fine-tuning a pretrained model: a
// tied Qwen2 and a GPT-2 are loaded with their heads untied, take the
// registry's roles and recipe (Muon blocks, AdamW embedding, RowNorm
// head), lower their loss on a batch over 20 updates, and export as a
// directory that loads back with the trained weights and generates.
func TestFineTune(t *testing.T) {
	dev := cpu.New()
	for _, fixture := range []string{"qwen2", "gpt2"} {
		t.Run(fixture, func(t *testing.T) {
			dir := filepath.Join("testdata", fixture)
			m, cfg, err := Load(dev, dir, Options{UntieHead: true})
			if err != nil {
				t.Fatal(err)
			}
			fam, err := registry.Lookup(cfg.Family)
			if err != nil {
				t.Fatal(err)
			}
			roles, err := fam.Roles(m)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := registry.Recipe(roles, m.Parameters(), registry.RecipeOptions{Head: optim.HeadRowNorm, Width: 16})
			if err != nil {
				t.Fatal(err)
			}
			set, err := optim.NewSet(rec, m.Parameters())
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := set.Group("head").(*optim.RowNorm); !ok {
				t.Fatalf("head optimizer %T, want RowNorm", set.Group("head"))
			}
			want := readGolden(t, dir)
			var in, tg []int32
			for _, row := range want.Tokens {
				in, tg = append(in, row[:len(row)-1]...), append(tg, row[1:]...)
			}
			inputs, _ := tensor.FromInt32(dev, in, len(want.Tokens), len(want.Tokens[0])-1)
			targets, _ := tensor.FromInt32(dev, tg, len(want.Tokens), len(want.Tokens[0])-1)
			g := autograd.New(dev)
			var first, last float32
			for step := range 20 {
				loss := m.(lossModel).Loss(g, inputs, targets)
				if err := g.Err(); err != nil {
					t.Fatal(err)
				}
				if step == 0 {
					first = loss.Item()
				}
				last = loss.Item()
				if err := g.Backward(loss); err != nil {
					t.Fatal(err)
				}
				if err := set.Step(1); err != nil {
					t.Fatal(err)
				}
				tensor.ZeroGrad(m.Parameters())
				g.Reset()
			}
			if !(last < 0.8*first) {
				t.Errorf("loss %.4f -> %.4f over 20 updates: want a clear decrease", first, last)
			}
			out := t.TempDir()
			if err := Save(out, m, safetensors.F32); err != nil {
				t.Fatal(err)
			}
			back, _, err := Load(dev, out, Options{})
			if err != nil {
				t.Fatal(err)
			}
			sameParams(t, m, back)
			if _, err := models.Generate(dev, back, want.Prompt, models.GenerateOptions{Tokens: 8, Temperature: 1, Seed: 1}); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: loss %.4f -> %.4f in 20 updates; the export loads back bit-identical", cfg.Architecture, first, last)
		})
	}
}
