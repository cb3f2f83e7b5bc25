// Command paper-recipe trains the paper's transformer (models.New) with
// the paper's optimizer recipe (optim.PaperRecipe: Muon on the blocks,
// AdamW on the embedding, RowNorm or AdamW on the LM head) in a plain
// training loop of its own: zero the gradients, forward and backward,
// clip the one global gradient norm at 1, step every group with the
// warmup-cosine multiplier. After the first update and every -log-every it logs the exact
// row diameter D(S_t) of the head's step S_t (optim/geometry.RowDiameter),
// which RowNorm keeps at or below 2 lr_t. The data is byte-level text
// (vocabulary 256, so the V x V geometry stays cheap): by default Newton's
// Opticks, which every Go installation ships.
//
//	go run ./examples/paper-recipe -steps 200
//	go run ./examples/paper-recipe -head adamw
package main

import (
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/optim/geometry"
	"github.com/hilbert-ml/hilbert/tensor"
	"github.com/hilbert-ml/hilbert/tokenizer/bytelevel"
)

// options are the example's flags.
type options struct {
	text                    string
	head                    string
	layers, dim, context    int
	batch, steps, logEvery  int
	muonLR, embedLR, headLR float64
	seed                    uint64
	quiet                   bool
}

// logLine is one logged update.
type logLine struct {
	Step int
	// Loss is the update's training loss; LR the head's scheduled rate.
	Loss, LR float64
	// D is the exact row diameter of the head's step S_t.
	D float64
}

func main() {
	var o options
	flag.StringVar(&o.text, "text", "", "training text file (default: $(go env GOROOT)/src/testdata/Isaac.Newton-Opticks.txt)")
	flag.StringVar(&o.head, "head", "rownorm", "LM-head optimizer: rownorm or adamw")
	flag.IntVar(&o.layers, "layers", 2, "blocks")
	flag.IntVar(&o.dim, "dim", 128, "model width (heads of 64)")
	flag.IntVar(&o.context, "context", 64, "sequence length")
	flag.IntVar(&o.batch, "batch", 8, "sequences per update")
	flag.IntVar(&o.steps, "steps", 200, "updates")
	flag.IntVar(&o.logEvery, "log-every", 20, "log the loss and D(S_t) after the first update and every N")
	flag.Float64Var(&o.muonLR, "muon-lr", 0.02, "Muon peak LR (the paper: 8e-3 at its scale)")
	flag.Float64Var(&o.embedLR, "embed-lr", 0.02, "embedding AdamW peak LR (the paper: 4e-3)")
	flag.Float64Var(&o.headLR, "head-lr", 0.01, "head peak LR (0: the paper's value for the width)")
	flag.Uint64Var(&o.seed, "seed", 1, "init and data seed")
	flag.Parse()
	if _, err := run(cpu.New(), o); err != nil {
		log.Fatal(err)
	}
}

// opticks is the path of the text Go ships in GOROOT/src/testdata.
func opticks() (string, error) {
	roots := []string{runtime.GOROOT()}
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		roots = append([]string{strings.TrimSpace(string(out))}, roots...)
	}
	for _, r := range roots {
		p := filepath.Join(r, "src", "testdata", "Isaac.Newton-Opticks.txt")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no Isaac.Newton-Opticks.txt under the Go roots %q: pass -text FILE", roots)
}

// readBytes reads -text (default Opticks) as byte tokens, at least a
// window of -context+1 of them.
func readBytes(o options) ([]int32, error) {
	path := o.text
	if path == "" {
		var err error
		if path, err = opticks(); err != nil {
			return nil, err
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-text: %w", err)
	}
	data := bytelevel.Encode(string(raw))
	if len(data) <= o.context+1 {
		return nil, fmt.Errorf("-text %s: %d bytes, fewer than a window of -context+1 = %d", path, len(data), o.context+1)
	}
	return data, nil
}

// paperOptimizers is the paper's recipe over the model: blocks.* to Muon,
// embed.weight to AdamW, head.weight to RowNorm (or AdamW), each with its
// own peak LR; it prints the groups.
func paperOptimizers(o options, head optim.HeadOptimizer, model *models.Transformer) (*optim.Set, error) {
	recipe := optim.PaperRecipe(optim.PaperOptions{Head: head, Width: o.dim, HeadLR: o.headLR})
	for i := range recipe.Groups {
		switch g := &recipe.Groups[i]; c := g.Config.(type) {
		case optim.MuonConfig:
			c.LR = o.muonLR
			g.Config = c
		case optim.AdamWConfig:
			if g.Name == "embed" {
				c.LR = o.embedLR
				g.Config = c
			}
		}
	}
	opt, err := optim.NewSet(recipe, model.Parameters())
	if err != nil {
		return nil, err
	}
	for _, g := range opt.Groups() {
		fmt.Printf("%-6s %-7s %d tensors\n", g.Name, g.Optimizer.Kind(), len(g.Optimizer.Params()))
	}
	return opt, nil
}

func run(dev device.Device, o options) ([]logLine, error) {
	head, err := headOptimizer(o.head)
	if err != nil {
		return nil, err
	}
	if o.batch <= 0 || o.steps < 2 || o.logEvery <= 0 {
		return nil, fmt.Errorf("-batch %d, -steps %d, -log-every %d: want batch, log-every > 0 and steps >= 2", o.batch, o.steps, o.logEvery)
	}
	data, err := readBytes(o)
	if err != nil {
		return nil, err
	}
	t := o.context
	cfg := models.Config{Layers: o.layers, Dim: o.dim, HeadDim: 64, MLPHidden: 4 * o.dim, Vocab: bytelevel.VocabSize,
		Context: t, RoPEBase: 10000, InitStd: 0.02}
	model, err := models.New(dev, cfg, o.seed)
	if err != nil {
		return nil, err
	}
	opt, err := paperOptimizers(o, head, model)
	if err != nil {
		return nil, err
	}
	headLR := o.headLR
	if headLR <= 0 {
		headLR = optim.PaperHeadLR(head, o.dim)
	}
	sched, err := optim.NewCosine(o.steps, o.steps/10)
	if err != nil {
		return nil, err
	}

	rng := rand.New(rand.NewPCG(o.seed, 3))
	in, tg := make([]int32, o.batch*t), make([]int32, o.batch*t)
	inputs, err := tensor.FromInt32(dev, in, o.batch, t)
	if err != nil {
		return nil, err
	}
	targets, err := tensor.FromInt32(dev, tg, o.batch, t)
	if err != nil {
		return nil, err
	}
	g := autograd.New(dev)
	defer g.Reset()
	var logs []logLine
	for step := range o.steps {
		randomWindows(rng, data, in, tg, o.batch, t)
		inputs.SetInt32(in)
		targets.SetInt32(tg)
		opt.ZeroGrad()
		g.Reset()
		loss, _ := model.Forward(g, inputs, targets, models.ForwardOptions{})
		if err := g.Err(); err != nil {
			return logs, err
		}
		l := float64(loss.Item())
		if err := g.Backward(loss); err != nil {
			return logs, err
		}
		if _, err := optim.ClipGradNorm(opt.Params(), 1); err != nil {
			return logs, fmt.Errorf("update %d: %w", step+1, err)
		}
		scale := sched.Scale(step)
		if err := opt.Step(scale); err != nil {
			return logs, err
		}
		if done := step + 1; done == 1 || done%o.logEvery == 0 || done == o.steps {
			ln, err := logUpdate(opt, model, done, l, headLR*scale)
			if err != nil {
				return logs, err
			}
			logs = append(logs, ln)
		}
	}
	return logs, nil
}

// logUpdate measures D(S_t) of S_t, the step the head optimizer just
// applied (V x d), and prints the update's line.
func logUpdate(opt *optim.Set, model *models.Transformer, done int, loss, lr float64) (logLine, error) {
	s := opt.LastStep(model.Head.Weight)
	d, err := geometry.RowDiameter(cpu.New(), s.Float32s(), s.Dim(0), s.Dim(1))
	if err != nil {
		return logLine{}, err
	}
	ln := logLine{Step: done, Loss: loss, LR: lr, D: d.D}
	ratio := 0.0
	if ln.LR > 0 {
		ratio = ln.D / ln.LR
	}
	fmt.Printf("update %4d  loss %.4f  head lr %.3g  D(S_t) %.4g  D/lr %.4f\n", done, loss, ln.LR, ln.D, ratio)
	return ln, nil
}

// randomWindows fills in with batch windows of t bytes at random offsets
// of data, and tg with the bytes that follow each.
func randomWindows(rng *rand.Rand, data, in, tg []int32, batch, t int) {
	for s := range batch {
		at := rng.IntN(len(data) - t)
		copy(in[s*t:(s+1)*t], data[at:at+t])
		copy(tg[s*t:(s+1)*t], data[at+1:at+t+1])
	}
}

// headOptimizer reads -head.
func headOptimizer(name string) (optim.HeadOptimizer, error) {
	switch name {
	case "rownorm":
		return optim.HeadRowNorm, nil
	case "adamw":
		return optim.HeadAdamW, nil
	}
	return 0, fmt.Errorf("-head %q: want rownorm or adamw", name)
}
