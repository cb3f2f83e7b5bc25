package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/profile"
	"github.com/hilbert-ml/hilbert/models/registry"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/tensor"
	"github.com/hilbert-ml/hilbert/train"
)

// benchModelFlags are bench model's settings.
type benchModelFlags struct {
	benchModelChoice
	devName, autocast     string
	untie                 bool
	update                string
	batch, seq, steps     int
	blockRows, profileTop int
}

// benchModel is a built model with its inputs and the step to time.
type benchModel struct {
	dev             device.Device
	prof            *profile.Device // nil without -profile
	m               train.LanguageModel
	opt             *optim.Set // nil: forward+backward only
	g               *autograd.Graph
	inputs, targets *tensor.Tensor
}

// The -update values: forward+backward only, the family's recipe
// (registry.Recipe: the paper's for the paper model), AdamW on every
// parameter; the last two clip the gradient norm at 1.0 first.
const (
	updateOff    = "off"
	updateRecipe = "recipe"
	updateAdamW  = "adamw"
)

// runBenchModel is the "model" bench target: it times forward+backward
// passes, or whole updates, of a models preset; "bench parity" compares
// the same measures with PyTorch.
func runBenchModel(args []string, stdout, stderr io.Writer) error {
	var f benchModelFlags
	fs := newFlagSet("bench model", "", stderr)
	f.benchModelChoice.flags(fs, "paper", "cpu-128")
	fs.BoolVar(&f.untie, "untie-head", false, "untie a head tied to the embedding (gpt2)")
	fs.StringVar(&f.update, "update", updateOff, "what a step is: off (forward+backward), recipe (then the gradient norm clipped at 1.0 and the family's optimizer recipe, the paper's for the paper model, an AdamW head for a tied one) or adamw (clipping, then AdamW on every parameter)")
	fs.IntVar(&f.batch, "batch", 8, "sequences per step")
	fs.IntVar(&f.seq, "seq", 256, "tokens per sequence")
	fs.IntVar(&f.steps, "steps", 3, "timed steps (after one warm-up step)")
	fs.StringVar(&f.devName, "device", "cpu", "cpu, cuda or cuda:N")
	fs.StringVar(&f.autocast, "autocast", "off", "bf16: block matrix products in bfloat16 (the paper's GPU precision), or off")
	fs.IntVar(&f.blockRows, "block-rows", 0, "rows of logits the fused head holds at once (0: the default)")
	fs.IntVar(&f.profileTop, "profile", 0, "after the timed steps, profile one more step (each kernel call timed to completion) and print its N costliest operations to stderr")
	if stop, err := parseCommand(fs, args); stop {
		return err
	}
	b, err := buildBenchModel(fs.Name(), f)
	if err != nil {
		return err
	}
	if err := b.step(); err != nil {
		return err
	}
	start := time.Now()
	for range f.steps {
		if err := b.step(); err != nil {
			return err
		}
	}
	per := time.Since(start).Seconds() / float64(f.steps)
	out := map[string]any{
		"target": "model", "model": f.family, "preset": f.preset, "batch": f.batch, "seq": f.seq, "steps": f.steps, "update": f.update,
		"ms_per_step": per * 1000, "tokens_per_s": float64(f.batch*f.seq) / per, "threads": cpu.Threads(),
		"device": b.dev.Name(), "autocast": f.autocast, "block_rows": f.blockRows,
	}
	if b.prof != nil {
		// The speed first, in case the profiled step fails (scripts/gpu's
		// summary reads this line when the JSON is missing).
		fmt.Fprintf(stderr, "bench model: %.0f tokens/s (%.1f ms a step)\n", float64(f.batch*f.seq)/per, per*1000)
		if err := b.profile(f, out, stderr); err != nil {
			return err
		}
	}
	return json.NewEncoder(stdout).Encode(out)
}

// buildBenchModel checks the flags and builds the model (on a profiled
// device with -profile) and its random inputs.
func buildBenchModel(cmd string, f benchModelFlags) (*benchModel, error) {
	fam, cfg, err := f.config(cmd)
	if err != nil {
		return nil, err
	}
	if f.update != updateOff && f.update != updateRecipe && f.update != updateAdamW {
		return nil, usageErr(cmd, fmt.Errorf("-update %q: want off, recipe or adamw", f.update))
	}
	size := registry.SizesOf(cfg)
	if f.seq > size.Context || f.batch < 1 || f.steps < 1 {
		return nil, usageErr(cmd, fmt.Errorf("batch %d, seq %d (context %d), steps %d: want batch and steps >= 1 and seq at most the context", f.batch, f.seq, size.Context, f.steps))
	}
	b := &benchModel{}
	if b.dev, err = openDevice(f.devName); err != nil {
		return nil, err
	}
	precision, err := (train.Config{Autocast: f.autocast}).AutocastDType()
	if err != nil {
		return nil, err
	}
	if f.profileTop > 0 {
		b.prof = profile.Wrap(b.dev)
		b.dev = b.prof
	}
	built, err := fam.Build(b.dev, cfg, registry.BuildOptions{Seed: 1, UntieHead: f.untie})
	if err != nil {
		return nil, err
	}
	var ok bool
	if b.m, ok = built.(train.LanguageModel); !ok {
		return nil, fmt.Errorf("-model %s: %T has no Loss(g, inputs, targets) method to time", f.family, built)
	}
	b.m = train.WithBlockRows(b.m, f.blockRows)
	if b.opt, err = benchOptimizer(fam, built, cfg, f); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]int32, f.batch*f.seq)
	for i := range ids {
		ids[i] = int32(rng.IntN(size.Vocab))
	}
	if b.inputs, err = tensor.FromInt32(b.dev, ids, f.batch, f.seq); err != nil {
		return nil, err
	}
	if b.targets, err = tensor.FromInt32(b.dev, ids, f.batch, f.seq); err != nil {
		return nil, err
	}
	b.g = autograd.New(b.dev)
	b.g.SetAutocast(precision)
	return b, nil
}

// step runs one forward and backward pass to completion.
func (b *benchModel) step() error {
	b.g.Reset()
	tensor.ZeroGrad(b.m.Parameters())
	loss := b.m.Loss(b.g, b.inputs, b.targets)
	if err := b.g.Err(); err != nil {
		return err
	}
	if err := b.g.Backward(loss); err != nil {
		return err
	}
	if b.opt != nil {
		if _, err := optim.ClipGradNorm(b.m.Parameters(), 1); err != nil {
			return err
		}
		if err := b.opt.Step(0.5); err != nil {
			return err
		}
	}
	return b.dev.Synchronize()
}

// benchOptimizer builds the optimizer -update asks for (nil for off): the
// family's recipe, with an AdamW head where the head is tied, or AdamW
// (GPT-2's usual settings) on every parameter.
func benchOptimizer(fam *registry.Family, m registry.Model, cfg any, f benchModelFlags) (*optim.Set, error) {
	params := m.Parameters()
	switch f.update {
	case updateRecipe:
		roles, err := fam.Roles(m)
		if err != nil {
			return nil, err
		}
		o := registry.RecipeOptions{Width: registry.SizesOf(cfg).Dim}
		if fam.Tied(cfg, registry.BuildOptions{UntieHead: f.untie}) {
			o.Head = optim.HeadAdamW
		}
		r, err := registry.Recipe(roles, params, o)
		if err != nil {
			return nil, err
		}
		return optim.NewSet(r, params)
	case updateAdamW:
		all := optim.AdamWConfig{LR: 6e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}
		return optim.NewSet(optim.Recipe{Groups: []optim.GroupSpec{{Name: "all", Match: func(string) bool { return true }, Config: all}}}, params)
	}
	return nil, nil
}

// profile runs one more step with every kernel call timed, prints the
// costliest operations and the attention share, and adds the share to out.
func (b *benchModel) profile(f benchModelFlags, out map[string]any, stderr io.Writer) error {
	b.prof.Record(true)
	err := b.step()
	b.prof.Record(false)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "profile of one step (%s, batch %d, seq %d, autocast %s; calls synchronized):\n", f.preset, f.batch, f.seq, f.autocast)
	if err := b.prof.WriteTable(stderr, f.profileTop); err != nil {
		return err
	}
	attn, total := attentionShare(b.prof.Ops())
	if total > 0 {
		share := float64(attn) / float64(total)
		fmt.Fprintf(stderr, "attention (forward and backward): %.1f ms of the %.1f ms profiled, %.1f%%\n",
			float64(attn)/1e6, float64(total)/1e6, 100*share)
		out["attention_share"] = share
	}
	return nil
}

// attentionShare sums the profiled time of the attention kernels (forward
// and backward, fused or composed) and of every call.
func attentionShare(ops []profile.Op) (attention, total time.Duration) {
	for _, o := range ops {
		total += o.Time
		if strings.HasPrefix(o.Name, "Attention") {
			attention += o.Time
		}
	}
	return attention, total
}
