package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hilbert-ml/hilbert/models/hf"
	"github.com/hilbert-ml/hilbert/safetensors"
	"github.com/hilbert-ml/hilbert/tokenizer"
	"github.com/hilbert-ml/hilbert/train"
)

func init() {
	register(subcommand{
		name:    "export",
		summary: "write a run's latest checkpoint as a Hugging Face model directory",
		run:     runExport,
	})
}

const exportUsage = `usage: hilbert export -run DIR -out DIR [-dtype f32|f16|bf16] [-tokenizer FILE]

Rebuilds the model of the run in -run from its latest checkpoint and writes
it to the new folder -out as a Hugging Face model directory: config.json
(GPT2LMHeadModel for a gpt2 run, LlamaForCausalLM or Qwen2ForCausalLM for
a llama run) and model.safetensors in -dtype, which hilbert sample -hf,
eval -hf, train -init-hf and transformers read. The paper's transformer has
no Hugging Face architecture and is refused.

tokenizer.json: -tokenizer's file, else GPT-2's (whose token ids the CLI's
-text data are) when the model's vocabulary holds them; a smaller
vocabulary gets none.

flags:
`

// exportDTypes are -dtype's values.
var exportDTypes = map[string]safetensors.DType{"f32": safetensors.F32, "f16": safetensors.F16, "bf16": safetensors.BF16}

func runExport(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("export", exportUsage, stderr)
	var runDir, out, dtypeName, tokPath string
	fs.StringVar(&runDir, "run", "", "the run's folder (RUNS/NAME)")
	fs.StringVar(&out, "out", "", "the Hugging Face `directory` to write (new, or empty)")
	fs.StringVar(&dtypeName, "dtype", "f32", "the tensors' dtype: f32, f16 or bf16 (rounded to nearest even)")
	fs.StringVar(&tokPath, "tokenizer", "", "a tokenizer.json `file` to write instead of GPT-2's (a run initialised from a directory with its own: that one)")
	if stop, err := parseCommand(fs, args); stop {
		return err
	}
	dtype, ok := exportDTypes[strings.ToLower(dtypeName)]
	if !ok {
		return usageErr(fs.Name(), fmt.Errorf("-dtype %q: want f32, f16 or bf16", dtypeName))
	}
	if out == "" {
		return usageErr(fs.Name(), errors.New("-out: name the Hugging Face directory to write"))
	}
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		return fmt.Errorf("-out %s holds %d files already: give a new or empty folder", out, len(entries))
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("-out: %w", err)
	}
	ck, err := readRunCheckpoint(runDir)
	if err != nil {
		return err
	}
	defer ck.Close()
	if ck.Model.IsPaper() {
		return fmt.Errorf("run %s trains the paper's transformer (model %q), which has no Hugging Face architecture: export writes gpt2 and llama runs (hilbert train -model gpt2|llama)", runDir, train.PaperFamily)
	}
	vocab := ck.Model.Sizes().Vocab
	tokJSON, tokNote, err := exportTokenizer(tokPath, vocab)
	if err != nil {
		return err
	}
	_, m, err := ck.loadModel("cpu")
	if err != nil {
		return err
	}
	hm, ok := m.(hf.Model)
	if !ok {
		return fmt.Errorf("run %s: model %q (%T) has no Hugging Face layout", runDir, ck.Model.FamilyName(), m)
	}
	if err := hf.Save(out, hm, dtype); err != nil {
		return err
	}
	files := "config.json, model.safetensors (" + string(dtype) + ")"
	if tokJSON != nil {
		if err := os.WriteFile(filepath.Join(out, "tokenizer.json"), tokJSON, 0o644); err != nil {
			return err
		}
		files += ", tokenizer.json"
	}
	cfg, err := hf.ReadConfig(out, 0)
	if err != nil {
		return fmt.Errorf("the export does not read back: %w", err)
	}
	fmt.Fprintf(stdout, "exported run %s, update %d, as %s to %s: %s\n", runDir, ck.Step, cfg.Architecture, out, files)
	if tokNote != "" {
		fmt.Fprintln(stdout, tokNote)
	}
	return nil
}

// exportTokenizer returns the tokenizer.json to write for a model of
// vocab tokens: the file at path (which must load and fit the
// vocabulary), else GPT-2's where the vocabulary holds its ids; or none,
// with a note saying why.
func exportTokenizer(path string, vocab int) ([]byte, string, error) {
	if path != "" {
		tok, err := tokenizer.LoadJSON(path)
		if err != nil {
			return nil, "", fmt.Errorf("-tokenizer: %w", err)
		}
		if n := tok.VocabSize(); n > vocab {
			return nil, "", fmt.Errorf("-tokenizer %s has %d tokens, more than the model's vocabulary of %d", path, n, vocab)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, "", fmt.Errorf("-tokenizer: %w", err)
		}
		return b, "", nil
	}
	if vocab < tokenizer.VocabSize {
		return nil, fmt.Sprintf("no tokenizer.json: the model's vocabulary of %d does not hold GPT-2's %d token ids (give -tokenizer FILE for its own)", vocab, tokenizer.VocabSize), nil
	}
	tok, err := tokenizer.GPT2()
	if err != nil {
		return nil, "", err
	}
	var b strings.Builder
	if err := tok.WriteJSON(&b); err != nil {
		return nil, "", err
	}
	return []byte(b.String()), "", nil
}
