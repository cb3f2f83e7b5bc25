package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/data/fineweb"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/models/registry"
	"github.com/hilbert-ml/hilbert/train"

	"github.com/hilbert-ml/hilbert/internal/regfile"
)

func init() {
	register(subcommand{
		name:    "eval",
		summary: "print the validation loss of a run's latest checkpoint",
		run:     runEval,
	})
}

const evalUsage = `usage: hilbert eval -run DIR -val FILE [flags]

Loads the latest checkpoint of the run in DIR and prints its mean token
cross-entropy on the first -val-tokens tokens of the validation shard FILE
(an llm.c shard, as hilbert prepare or hilbert train -text writes them:
RUNS/NAME/data/text_val_000000.bin), in sequences of the run's length and
micro-batches of its size, as training validates; nothing is trained. When
the run's metrics.jsonl has the checkpoint's update, its D(S_t) and Hilbert
RMS (the last logged at or before it) are printed too.

flags:
`

func runEval(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, evalUsage)
		fs.PrintDefaults()
	}
	var (
		runDir, valPath, devName string
		valTokens                int
	)
	fs.StringVar(&runDir, "run", "", "the run's folder (RUNS/NAME)")
	fs.StringVar(&valPath, "val", "", "validation shard `file`")
	nonNegative(fs, &valTokens, "val-tokens", 0, "validation prefix length in tokens (0: the run's val_tokens; cut to the shard)")
	fs.StringVar(&devName, "device", "cpu", "cpu or cuda[:N]")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return usageErr(fs.Name(), fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	ck, err := readRunCheckpoint(runDir)
	if err != nil {
		return err
	}
	defer ck.Close()
	if valPath == "" {
		return fmt.Errorf("-val: name the validation shard (for a -text run: %s)", filepath.Join(runDir, "data", "text_val_000000.bin"))
	}
	seqLen, err := ck.intSetting("seq_len")
	if err != nil {
		return err
	}
	micro, err := ck.intSetting("micro_batch")
	if err != nil {
		return err
	}
	if valTokens == 0 {
		if valTokens, err = ck.intSetting("val_tokens"); err != nil {
			return fmt.Errorf("%w (pass -val-tokens)", err)
		}
	}
	blockRows := 0
	if v, ok := ck.Settings["block_rows"]; ok {
		if blockRows, err = strconv.Atoi(v); err != nil || blockRows < 0 {
			return fmt.Errorf("checkpoint %s: state.json: setting block_rows = %q: want an integer >= 0", ck.Dir, v)
		}
	}
	dev, err := openDevice(devName)
	if err != nil {
		return err
	}
	m, err := ck.loadModel(dev)
	if err != nil {
		return err
	}
	var autocast device.DType
	if ck.Settings["autocast"] == "bf16" {
		autocast = device.BFloat16
	}
	loss, tokens, err := validationLoss(dev, m, ck.Model.Sizes().Vocab, valPath, valTokens, seqLen, micro, blockRows, autocast)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "run %s, update %d: val loss %.6f over %d tokens of %s\n", runDir, ck.Step, loss, tokens, valPath)
	rec, err := lastDiagnostics(filepath.Join(runDir, "metrics.jsonl"), ck.Step)
	if err != nil {
		return err
	}
	if rec != nil {
		fmt.Fprintf(stdout, "update %d: D(S_t) %.6g", rec.Step, *rec.Diameter)
		if rec.LR != nil {
			fmt.Fprintf(stdout, " (head LR %.4g, D/LR %.4f)", *rec.LR, *rec.Diameter / *rec.LR)
		}
		if rec.HilbertRMS != nil {
			fmt.Fprintf(stdout, ", Hilbert RMS %.6g", *rec.HilbertRMS)
		}
		fmt.Fprintln(stdout)
	}
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
	sh, err := fineweb.OpenShard(path, vocab)
	if err != nil {
		return 0, 0, fmt.Errorf("-val: %w", err)
	}
	have := sh.Len()
	sh.Close()
	n := min(nTokens, have)
	if n < seqLen+1 {
		return 0, 0, fmt.Errorf("-val %s holds %d tokens, fewer than the run's seq_len+1 = %d", path, have, seqLen+1)
	}
	v, err := fineweb.Validation(path, n, seqLen, micro)
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
