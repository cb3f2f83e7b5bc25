package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/profile"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/models/registry"
	"github.com/hilbert-ml/hilbert/tensor"
	"github.com/hilbert-ml/hilbert/train"
)

// runBenchModel is the "model" bench target: it times forward+backward
// passes of a models preset; scripts/parity/bench.sh compares the same
// measure with PyTorch.
func runBenchModel(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench model", flag.ContinueOnError)
	fs.SetOutput(stderr)
	family := fs.String("model", "paper", "model family: "+strings.Join(registry.Names(), ", "))
	preset := fs.String("preset", "cpu-128", "model preset of the family ("+presetsUsage()+")")
	untie := fs.Bool("untie-head", false, "untie a head tied to the embedding (gpt2)")
	batch := fs.Int("batch", 8, "sequences per step")
	seq := fs.Int("seq", 256, "tokens per sequence")
	steps := fs.Int("steps", 3, "timed steps (after one warm-up step)")
	devName := fs.String("device", "cpu", "cpu, cuda or cuda:N")
	autocast := fs.String("autocast", "off", "bf16: block matrix products in bfloat16 (the paper's GPU precision), or off")
	blockRows := fs.Int("block-rows", 0, "rows of logits the fused head holds at once (0: the default)")
	profileTop := fs.Int("profile", 0, "after the timed steps, profile one more step (each kernel call timed to completion) and print its N costliest operations to stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fam, err := registry.Lookup(*family)
	if err != nil {
		return usageErr(fs.Name(), fmt.Errorf("-model: %w", err))
	}
	cfg, err := fam.Preset(*preset)
	if err != nil {
		return usageErr(fs.Name(), fmt.Errorf("-preset: %w", err))
	}
	size := registry.SizesOf(cfg)
	if *seq > size.Context || *batch < 1 || *steps < 1 {
		return usageErr(fs.Name(), fmt.Errorf("batch %d, seq %d (context %d), steps %d: want batch and steps >= 1 and seq at most the context", *batch, *seq, size.Context, *steps))
	}
	dev, err := openDevice(*devName)
	if err != nil {
		return err
	}
	precision, err := (train.Config{Autocast: *autocast}).AutocastDType()
	if err != nil {
		return err
	}
	var prof *profile.Device
	if *profileTop > 0 {
		prof = profile.Wrap(dev)
		dev = prof
	}
	built, err := fam.Build(dev, cfg, registry.BuildOptions{Seed: 1, UntieHead: *untie})
	if err != nil {
		return err
	}
	m, ok := built.(train.LanguageModel)
	if !ok {
		return fmt.Errorf("-model %s: %T has no Loss(g, inputs, targets) method to time", *family, built)
	}
	if t, ok := built.(*models.Transformer); ok && *blockRows > 0 {
		m = boundedHead{t, *blockRows}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]int32, *batch**seq)
	for i := range ids {
		ids[i] = int32(rng.IntN(size.Vocab))
	}
	inputs, err := tensor.FromInt32(dev, ids, *batch, *seq)
	if err != nil {
		return err
	}
	targets, err := tensor.FromInt32(dev, ids, *batch, *seq)
	if err != nil {
		return err
	}
	g := autograd.New(dev)
	g.SetAutocast(precision)
	step := func() error {
		g.Reset()
		autograd.ZeroGrad(m.Parameters())
		loss := m.Loss(g, inputs, targets)
		if err := g.Err(); err != nil {
			return err
		}
		if err := g.Backward(loss); err != nil {
			return err
		}
		return dev.Synchronize()
	}
	if err := step(); err != nil {
		return err
	}
	start := time.Now()
	for range *steps {
		if err := step(); err != nil {
			return err
		}
	}
	per := time.Since(start).Seconds() / float64(*steps)
	if prof != nil {
		// The speed first, in case the profiled step fails (scripts/gpu's
		// summary reads this line when the JSON is missing).
		fmt.Fprintf(stderr, "bench model: %.0f tokens/s (%.1f ms a step)\n", float64(*batch**seq)/per, per*1000)
		prof.Record(true)
		err := step()
		prof.Record(false)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "profile of one step (%s, batch %d, seq %d, autocast %s; calls synchronized):\n", *preset, *batch, *seq, *autocast)
		if err := prof.WriteTable(stderr, *profileTop); err != nil {
			return err
		}
	}
	out := map[string]any{
		"target": "model", "model": *family, "preset": *preset, "batch": *batch, "seq": *seq, "steps": *steps,
		"ms_per_step": per * 1000, "tokens_per_s": float64(*batch**seq) / per, "threads": cpu.Threads(),
		"device": dev.Name(), "autocast": *autocast, "block_rows": *blockRows,
	}
	if prof != nil {
		attn, total := attentionShare(prof.Ops())
		if total > 0 {
			share := float64(attn) / float64(total)
			fmt.Fprintf(stderr, "attention (forward and backward): %.1f ms of the %.1f ms profiled, %.1f%%\n",
				float64(attn)/1e6, float64(total)/1e6, 100*share)
			out["attention_share"] = share
		}
	}
	return json.NewEncoder(stdout).Encode(out)
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

// boundedHead is the paper's transformer with a bound on the fused head's
// row blocks (bench model -block-rows).
type boundedHead struct {
	m    *models.Transformer
	rows int
}

func (b boundedHead) Parameters() []*tensor.Tensor { return b.m.Parameters() }

func (b boundedHead) Loss(g *autograd.Graph, inputs, targets *tensor.Tensor) *tensor.Tensor {
	loss, _ := b.m.Forward(g, inputs, targets, models.ForwardOptions{BlockRows: b.rows})
	return loss
}
