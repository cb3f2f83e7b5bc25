// Command gpt2-corpus trains a byte-level GPT-2 (models.GPT2 with
// tokenizer/bytelevel, vocabulary 256) on plain or gzip text, by default
// the offline corpus in ../shared/corpus, with AdamW (weight decay on the
// matrices only) and a warmup-cosine schedule through train.Loop over
// the text held in memory (train.Windows), then prints a sample from
// models.Generate.
//
//	go run ./examples/gpt2-corpus                       # the default: about 4 minutes on 2 cores
//	go run ./examples/gpt2-corpus -corpus book.txt -steps 1000 -layers 6 -dim 256
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/data"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/tensor"
	"github.com/hilbert-ml/hilbert/tokenizer/bytelevel"
	"github.com/hilbert-ml/hilbert/train"
)

// options are the example's flags.
type options struct {
	corpus   string
	maxBytes int
	model    models.GPT2Config
	batch    int
	steps    int
	lr       float64
	seed     uint64
	logEvery int
	prompt   string
	tokens   int
	temp     float64
	topK     int
	out      io.Writer
}

// result is what a run measured.
type result struct {
	// FirstVal and LastVal are the validation loss (nats per byte) before
	// the first and after the last update.
	FirstVal, LastVal float64
	// Sample is the generated continuation of the prompt.
	Sample string
}

func main() {
	o := options{model: models.GPT2Config{Vocab: bytelevel.VocabSize, InitStd: 0.02}, out: os.Stdout}
	flag.StringVar(&o.corpus, "corpus", "../shared/corpus", "a text file (plain or .gz) or a folder of them (*.txt, *.txt.gz, read in name order)")
	flag.IntVar(&o.maxBytes, "max-bytes", 2<<20, "read at most this many bytes of text (the last 5% validate)")
	flag.IntVar(&o.model.Layers, "layers", 4, "blocks")
	flag.IntVar(&o.model.Dim, "dim", 128, "model width")
	flag.IntVar(&o.model.Heads, "heads", 4, "attention heads")
	flag.IntVar(&o.model.Context, "context", 128, "context length (and training sequence length)")
	flag.Float64Var(&o.model.Dropout, "dropout", 0, "dropout probability")
	flag.IntVar(&o.batch, "batch", 8, "sequences per update")
	flag.IntVar(&o.steps, "steps", 1000, "updates")
	flag.Float64Var(&o.lr, "lr", 5e-3, "AdamW peak learning rate (warmup 10%, cosine to 10%)")
	flag.Uint64Var(&o.seed, "seed", 1, "init, data and sampling seed")
	flag.IntVar(&o.logEvery, "log-every", 50, "print the losses every N updates")
	flag.StringVar(&o.prompt, "prompt", "It is a truth", "sample prompt")
	flag.IntVar(&o.tokens, "tokens", 100, "bytes to generate (prompt + tokens <= context)")
	flag.Float64Var(&o.temp, "temperature", 0.8, "sampling temperature (0: greedy)")
	flag.IntVar(&o.topK, "top-k", 0, "sample from the K most likely bytes (0: all)")
	flag.Parse()
	start := time.Now()
	r, err := run(cpu.New(), o)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("val loss %.4f -> %.4f nats/byte in %.0f s\n", r.FirstVal, r.LastVal, time.Since(start).Seconds())
}

// readCorpus returns up to maxBytes of text from path: a file (gzip when
// its bytes say so) or a folder's *.txt and *.txt.gz files in name order.
func readCorpus(path string, maxBytes int) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("-corpus: %w", err)
	}
	files := []string{path}
	if info.IsDir() {
		files = nil
		for _, pat := range []string{"*.txt", "*.txt.gz"} {
			m, _ := filepath.Glob(filepath.Join(path, pat))
			files = append(files, m...)
		}
		sort.Strings(files)
		if len(files) == 0 {
			return nil, fmt.Errorf("-corpus %s: no *.txt or *.txt.gz files", path)
		}
	}
	var buf bytes.Buffer
	for _, f := range files {
		if buf.Len() >= maxBytes {
			break
		}
		if err := readText(&buf, f, int64(maxBytes-buf.Len())); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// readText appends up to limit bytes of the text file path to dst, read
// as prepare and train -text read text (data.OpenText: plain or gzip,
// told by its bytes; a truncated gzip is an error).
func readText(dst *bytes.Buffer, path string, limit int64) error {
	r, err := data.OpenText(path, nil)
	if err != nil {
		return fmt.Errorf("-corpus: %w", err)
	}
	defer r.Close()
	if _, err := io.Copy(dst, io.LimitReader(r, limit)); err != nil {
		return fmt.Errorf("-corpus %s: %w", path, err)
	}
	return nil
}

// batcher cuts random windows of context+1 tokens from a token stream
// into inputs and next-token targets.
type batcher struct {
	data    []int32
	rng     *rand.Rand
	in, tgt []int32
}

func (b *batcher) fill(batch, t int) {
	for s := range batch {
		at := b.rng.IntN(len(b.data) - t)
		copy(b.in[s*t:(s+1)*t], b.data[at:at+t])
		copy(b.tgt[s*t:(s+1)*t], b.data[at+1:at+t+1])
	}
}

// nanoGPTOptimizers is nanoGPT's AdamW split: weight decay on the
// matrices and embeddings, none on biases and norms.
func nanoGPTOptimizers(lr float64, model *models.GPT2) (*optim.Set, error) {
	decay, noDecay := optim.PaperAdamW(lr), optim.PaperAdamW(lr)
	decay.Beta2, noDecay.Beta2 = 0.95, 0.95
	decay.Eps, noDecay.Eps = 1e-8, 1e-8
	noDecay.WeightDecay = 0
	matrices := func(name string) bool {
		return strings.HasSuffix(name, ".weight") && !strings.Contains(name, ".ln") && name != "norm.weight"
	}
	return optim.NewSet(optim.Recipe{Groups: []optim.GroupSpec{
		{Name: "decay", Match: matrices, Config: decay, Required: true},
		{Name: "no-decay", Match: func(name string) bool { return !matrices(name) }, Config: noDecay},
	}}, model.Parameters())
}

// validator measures the validation loss: the same 8 windows of the
// held-out text every time.
type validator struct {
	model           *models.GPT2
	g               *autograd.Graph
	val             *batcher
	inputs, targets *tensor.Tensor
	batch, t        int
	seed            uint64
}

func newValidator(dev device.Device, model *models.GPT2, g *autograd.Graph, data []int32, batch, t int, seed uint64) (*validator, error) {
	n := batch * t
	v := &validator{model: model, g: g, batch: batch, t: t, seed: seed,
		val: &batcher{data: data, in: make([]int32, n), tgt: make([]int32, n)}}
	var err error
	if v.inputs, err = tensor.FromInt32(dev, v.val.in, batch, t); err != nil {
		return nil, err
	}
	if v.targets, err = tensor.FromInt32(dev, v.val.tgt, batch, t); err != nil {
		return nil, err
	}
	return v, nil
}

// loss is the mean loss over the validation windows, in eval mode and
// without gradients.
func (v *validator) loss() (float64, error) {
	nn.SetTraining(v.model, false)
	defer nn.SetTraining(v.model, true)
	v.g.SetNoGrad(true)
	defer v.g.SetNoGrad(false)
	v.val.rng = rand.New(rand.NewPCG(v.seed, 8))
	var sum float64
	for range 8 {
		v.val.fill(v.batch, v.t)
		v.inputs.SetInt32(v.val.in)
		v.targets.SetInt32(v.val.tgt)
		v.g.Reset()
		loss := v.model.Loss(v.g, v.inputs, v.targets)
		if err := v.g.Err(); err != nil {
			return 0, err
		}
		sum += float64(loss.Item())
	}
	v.g.Reset()
	return sum / 8, nil
}

func run(dev device.Device, o options) (result, error) {
	var res result
	cfg, t := o.model, o.model.Context
	text, err := readCorpus(o.corpus, o.maxBytes)
	if err != nil {
		return res, err
	}
	data := bytelevel.Encode(string(text))
	cut := len(data) * 95 / 100
	if cut <= t+1 || len(data)-cut <= t+1 {
		return res, fmt.Errorf("-corpus %s: %d bytes are too few for training and validation windows of %d", o.corpus, len(data), t+1)
	}
	prompt := bytelevel.Encode(o.prompt)
	if len(prompt) == 0 || len(prompt)+o.tokens > t {
		return res, fmt.Errorf("-prompt of %d bytes and -tokens %d: want a non-empty prompt and at most -context %d together", len(prompt), o.tokens, t)
	}
	model, err := models.NewGPT2(dev, cfg, o.seed)
	if err != nil {
		return res, err
	}
	opt, err := nanoGPTOptimizers(o.lr, model)
	if err != nil {
		return res, err
	}
	sched, err := optim.NewCosine(o.steps, o.steps/10)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(o.out, "GPT-2 d %d, %d layers, %d heads, context %d: %d parameters; %d training bytes, %d validation bytes\n",
		cfg.Dim, cfg.Layers, cfg.Heads, t, nn.NumParams(model.Parameters()), cut, len(data)-cut)

	// The training text as an in-memory source of windows, and the loop
	// that trains any model on any source with the recipe above.
	windows, err := train.NewWindows(data[:cut], o.batch, t, o.seed)
	if err != nil {
		return res, err
	}
	loop, err := train.NewLoop(dev, train.LM(dev, model), train.Source[train.Tokens](windows), opt,
		train.LoopConfig{ClipNorm: 1, Schedule: sched})
	if err != nil {
		return res, err
	}

	val, err := newValidator(dev, model, loop.Graph(), data[cut:], o.batch, t, o.seed)
	if err != nil {
		return res, err
	}
	valLoss := val.loss
	if res.FirstVal, err = valLoss(); err != nil {
		return res, err
	}
	fmt.Fprintf(o.out, "step %4d  val %.4f\n", 0, res.FirstVal)
	err = loop.Run(context.Background(), o.steps, func(u train.Update) error {
		if u.Step%o.logEvery != 0 && u.Step != o.steps {
			return nil
		}
		v, err := valLoss()
		if err != nil {
			return err
		}
		res.LastVal = v
		fmt.Fprintf(o.out, "step %4d  train %.4f  val %.4f\n", u.Step, u.Loss, v)
		return nil
	})
	if err != nil {
		return res, err
	}

	if res.Sample, err = sample(dev, model, prompt, o); err != nil {
		return res, err
	}
	fmt.Fprintf(o.out, "--- sample ---\n%s%s\n", o.prompt, res.Sample)
	return res, nil
}

// sample continues the prompt with the trained model in eval mode.
func sample(dev device.Device, model *models.GPT2, prompt []int32, o options) (string, error) {
	nn.SetTraining(model, false)
	out, err := models.Generate(dev, model, prompt, models.GenerateOptions{Tokens: o.tokens, Temperature: o.temp, TopK: o.topK, Seed: o.seed})
	if err != nil {
		return "", err
	}
	b, err := bytelevel.Decode(out)
	return string(b), err
}
