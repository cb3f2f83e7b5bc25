package cli

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/data"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/models/hf"
	"github.com/hilbert-ml/hilbert/models/registry"
	"github.com/hilbert-ml/hilbert/train"

	"github.com/hilbert-ml/hilbert/internal/regfile"
)

func init() {
	register(subcommand{
		name:    "eval",
		summary: "print the validation loss of a run's latest checkpoint or a Hugging Face model",
		run:     runEval,
	})
}

const evalUsage = `usage: hilbert eval -run DIR -val FILE [flags]
       hilbert eval -hf DIR -val FILE [-seq-len N -micro-batch M -val-tokens K]

Loads the latest checkpoint of the run in DIR and prints its mean token
cross-entropy on the first -val-tokens tokens of the validation shard FILE
(an llm.c shard, as hilbert prepare or hilbert train -text writes them:
RUNS/NAME/data/text_val_000000.bin), in sequences of the run's length and
micro-batches of its size, as training validates; nothing is trained. When
the run's metrics.jsonl has the checkpoint's update, its D(S_t) and Hilbert
RMS (the last logged at or before it) are printed too.

With -hf, the model is the Hugging Face directory DIR (GPT2LMHeadModel,
Llama, Mistral, Qwen2), in sequences of -seq-len tokens (default its
context) and micro-batches of -micro-batch; the shard's token ids must be
below the model's vocabulary.

flags:
`

func runEval(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("eval", evalUsage, stderr)
	var (
		runDir, hfDir, valPath, devName string
		valTokens, seqLen, micro        int
	)
	fs.StringVar(&runDir, "run", "", "the run's folder (RUNS/NAME)")
	fs.StringVar(&hfDir, "hf", "", "a Hugging Face model `directory` (config.json, model.safetensors) instead of -run")
	fs.StringVar(&valPath, "val", "", "validation shard `file`")
	nonNegative(fs, &valTokens, "val-tokens", 0, "validation prefix length in tokens (0: the run's val_tokens, with -hf the whole shard; cut to the shard)")
	nonNegative(fs, &seqLen, "seq-len", 0, "with -hf: sequence length (0: the model's context)")
	positive(fs, &micro, "micro-batch", 8, "with -hf: sequences per forward pass")
	fs.StringVar(&devName, "device", "cpu", "cpu or cuda[:N]")
	if stop, err := parseCommand(fs, args); stop {
		return err
	}
	if runDir != "" && hfDir != "" {
		return usageErr(fs.Name(), errors.New("give -run (a run's folder) or -hf (a Hugging Face model directory), not both"))
	}
	if hfDir != "" {
		return evalHF(hfDir, valPath, devName, valTokens, seqLen, micro, stdout)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, name := range []string{"seq-len", "micro-batch"} {
		if given[name] {
			return usageErr(fs.Name(), fmt.Errorf("-%s is for -hf: a run is evaluated in its own sequences and micro-batches", name))
		}
	}
	return evalRun(runDir, valPath, devName, valTokens, stdout)
}

// evalSettings are the settings a run is evaluated with: its own
// sequences, micro-batches, head blocks and autocast, and -val-tokens (0:
// the run's).
type evalSettings struct {
	valTokens, seqLen, micro, blockRows int
	autocast                            device.DType
}

// evalRun prints the validation loss of the run in runDir at its latest
// checkpoint, in the run's own settings, then the diagnostics logged at
// or before that update.
func evalRun(runDir, valPath, devName string, valTokens int, stdout io.Writer) error {
	ck, err := readRunCheckpoint(runDir)
	if err != nil {
		return err
	}
	defer ck.Close()
	if valPath == "" {
		return fmt.Errorf("-val: name the validation shard (for a -text run: %s)", filepath.Join(runDir, "data", "text_val_000000.bin"))
	}
	es, err := ck.evalSettings(valTokens)
	if err != nil {
		return err
	}
	dev, m, err := ck.loadModel(devName)
	if err != nil {
		return err
	}
	loss, tokens, err := validationLoss(dev, m, ck.Model.Sizes().Vocab, valPath, es.valTokens, es.seqLen, es.micro, es.blockRows, es.autocast)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "run %s, update %d: val loss %.6f over %d tokens of %s\n", runDir, ck.Step, loss, tokens, valPath)
	rec, err := lastDiagnostics(filepath.Join(runDir, "metrics.jsonl"), ck.Step)
	if err != nil || rec == nil {
		return err
	}
	fmt.Fprintf(stdout, "update %d: D(S_t) %.6g", rec.Step, *rec.Diameter)
	if rec.LR != nil {
		fmt.Fprintf(stdout, " (head LR %.4g, D/LR %.4f)", *rec.LR, *rec.Diameter / *rec.LR)
	}
	if rec.HilbertRMS != nil {
		fmt.Fprintf(stdout, ", Hilbert RMS %.6g", *rec.HilbertRMS)
	}
	fmt.Fprintln(stdout)
	return nil
}

// evalSettings reads the run's evaluation settings from its checkpoint;
// valTokens, when not 0, replaces its val_tokens.
func (c *runCheckpoint) evalSettings(valTokens int) (es evalSettings, err error) {
	es.valTokens = valTokens
	if es.seqLen, err = c.intSetting("seq_len"); err != nil {
		return es, err
	}
	if es.micro, err = c.intSetting("micro_batch"); err != nil {
		return es, err
	}
	if es.valTokens == 0 {
		if es.valTokens, err = c.intSetting("val_tokens"); err != nil {
			return es, fmt.Errorf("%w (pass -val-tokens)", err)
		}
	}
	if v, ok := c.Settings["block_rows"]; ok {
		if es.blockRows, err = strconv.Atoi(v); err != nil || es.blockRows < 0 {
			return es, fmt.Errorf("checkpoint %s: state.json: setting block_rows = %q: want an integer >= 0", c.Dir, v)
		}
	}
	if c.Settings["autocast"] == "bf16" {
		es.autocast = device.BFloat16
	}
	return es, nil
}

// evalHF prints the validation loss of the Hugging Face directory dir.
func evalHF(dir, valPath, devName string, valTokens, seqLen, micro int, stdout io.Writer) error {
	if valPath == "" {
		return errors.New("-val: name the validation shard (an llm.c shard of the model's token ids)")
	}
	cfg, err := hf.ReadConfig(dir, device.Float32)
	if err != nil {
		return err
	}
	size := registry.SizesOf(cfg.Model)
	seqLen = cmp.Or(seqLen, size.Context)
	if seqLen > size.Context {
		return fmt.Errorf("-seq-len %d exceeds the model's context of %d (%s)", seqLen, size.Context, cfg.Path)
	}
	valTokens = cmp.Or(valTokens, math.MaxInt) // the whole shard
	dev, err := openDevice(devName)
	if err != nil {
		return err
	}
	m, _, err := hf.Load(dev, dir, hf.Options{})
	if err != nil {
		return err
	}
	loss, tokens, err := validationLoss(dev, m, size.Vocab, valPath, valTokens, seqLen, micro, 0, 0)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "hf %s (%s): val loss %.6f over %d tokens of %s\n", dir, cfg.Architecture, loss, tokens, valPath)
	return nil
}

// validationLoss is the mean token cross-entropy of m (of vocab tokens)
// over the first nTokens tokens of the shard at path, in micro-batches of micro
// sequences of seqLen tokens, weighted by tokens (as the trainer
// validates). It returns the loss and the tokens it covered.
func validationLoss(dev device.Device, model registry.Model, vocab int, path string, nTokens, seqLen, micro, blockRows int, autocast device.DType) (float64, int, error) {
	m, ok := model.(train.LanguageModel)
	if !ok {
		return 0, 0, fmt.Errorf("model %T has no Loss(g, inputs, targets) method (train.LanguageModel) to validate with", model)
	}
	sh, err := data.OpenShard(path, vocab)
	if err != nil {
		if s, err0 := data.OpenShard(path, 0); err0 == nil {
			// The file reads; its token ids do not fit the model.
			s.Close()
			return 0, 0, fmt.Errorf("-val: the model's vocabulary of %d does not hold the shard's tokens: %w", vocab, err)
		}
		return 0, 0, fmt.Errorf("-val: %w", err)
	}
	have := sh.Len()
	sh.Close()
	n := min(nTokens, have)
	if n < seqLen+1 {
		return 0, 0, fmt.Errorf("-val %s holds %d tokens, fewer than the run's seq_len+1 = %d", path, have, seqLen+1)
	}
	v, err := data.Validation(path, n, seqLen, micro)
	if err != nil {
		return 0, 0, fmt.Errorf("-val: %w", err)
	}
	defer v.Close()
	g := autograd.New(dev)
	g.SetAutocast(autocast)
	loss, tokens, err := train.ValidationLoss(g, m, v, blockRows)
	if err != nil {
		return 0, 0, fmt.Errorf("-val %s: %w", path, err)
	}
	return loss, tokens, nil
}

// lastDiagnostics returns the last record of metrics.jsonl at or before
// step that holds D(S_t), or nil when the file is missing or has none.
func lastDiagnostics(path string, step int) (*train.Record, error) {
	f, err := regfile.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var last *train.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		var r train.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			// A torn last line (a crash mid-write) ends the usable part.
			break
		}
		if r.Step <= step && r.Diameter != nil {
			last = &r
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return last, nil
}
