package cli

import (
	"strconv"
	"strings"

	"github.com/hilbert-ml/hilbert/models"
)

// parityRow is one line pair of "bench parity": the Hilbert command (a
// bench target of this binary) and the PyTorch one (a mode of
// scripts/parity/bench.py) that measure the same thing, each run as its
// own process, and the numbers read from their JSON lines.
type parityRow struct {
	name, title string
	hilbert     []string // arguments of hilbert: bench <target> ...
	pytorch     []string // arguments of bench.py: <mode> ...
	measures    []parityMeasure
	// flopsPerToken, when set, is the matrix-product work of a token of
	// the step (6 N + 12 L T d), for the GEMM-bound ideal.
	flopsPerToken float64
}

// parityMeasure is one number of a row: the JSON keys it is read from on
// each side, its unit, and whether more is better (a speed) or less (a
// latency).
type parityMeasure struct {
	label, hilbertKey, pytorchKey string
	lowerBetter                   bool
}

var (
	tokensPerS = parityMeasure{label: "tokens/s", hilbertKey: "tokens_per_s", pytorchKey: "tokens_per_s"}
	gflopsPerS = parityMeasure{label: "GFLOP/s", hilbertKey: "native_gflops_median", pytorchKey: "gflops"}
)

// parityGemmShape is the product of the GEMM rows, whose 2-thread rate is
// the ideal's.
const parityGemmShape = "2048x768x768"

// paperFlops is 6 N + 12 L T d of the paper's transformer (N: the
// parameters of its matrix products, the blocks' 16 d^2 and the head's
// V d; the embedding is a lookup).
func paperFlops(layers, dim, seq int) float64 {
	n := layers*16*dim*dim + models.PaperVocab*dim
	return 6*float64(n) + 12*float64(layers*seq*dim)
}

// gpt2Flops is the same for GPT-2 (12 d^2 a block, the tied head V d).
func gpt2Flops(layers, dim, seq int) float64 {
	n := layers*12*dim*dim + models.PaperVocab*dim
	return 6*float64(n) + 12*float64(layers*seq*dim)
}

// llamaFlops is the same for a Llama: per block the q and output
// projections (d x heads hd each), the k and v ones (d x kv hd each) and
// the SwiGLU's three d x hidden products, and the head V d (tied or not).
func llamaFlops(c models.LlamaConfig, seq int) float64 {
	hd := c.Dim / c.Heads
	if c.HeadDim != 0 {
		hd = c.HeadDim
	}
	block := 2*c.Dim*c.Heads*hd + 2*c.Dim*c.KVHeads*hd + 3*c.Dim*c.MLPHidden
	n := c.Layers*block + c.Vocab*c.Dim
	return 6*float64(n) + 12*float64(c.Layers*seq*c.Heads*hd)
}

// parityConfig sets the sizes of the rows: the by default
// (defaultParityConfig), tiny ones in the command's test.
type parityConfig struct {
	steps                   int // timed steps of a training child
	batch, seq, gpt2Batch   int
	paperSmall, paperLarge  [2]int // layers, dim
	gpt2Small               [3]int // layers, dim, heads
	gpt2Large               [3]int // GPT-2 124M
	llamaLayers             [2]int // the Llama preset cut to a few blocks, and whole (0)
	genPrompt, genTokens    int
	genBatches              [2]int
	gemmShape               string
	gemmReps                int
	threads                 int
	gpt2Preset, paperPreset string
	llamaPreset             string
}

func defaultParityConfig(threads int) parityConfig {
	return parityConfig{
		steps: 3, batch: 8, seq: 256, gpt2Batch: 4,
		paperSmall: [2]int{2, 128}, paperLarge: [2]int{4, 256},
		gpt2Small: [3]int{4, 256, 4}, gpt2Large: [3]int{12, 768, 12},
		genPrompt: 64, genTokens: 32, genBatches: [2]int{1, 8},
		gemmShape: parityGemmShape, gemmReps: 10, threads: threads,
		gpt2Preset: "gpt2", paperPreset: "cpu-128",
		llamaLayers: [2]int{4, 0}, llamaPreset: "smollm-135m",
	}
}

// parityRows builds the rows of c, in the order of issue 24's table.
func parityRows(c parityConfig) []parityRow {
	itoa := strconv.Itoa
	th := itoa(c.threads)
	steps := itoa(c.steps)
	var rows []parityRow
	for _, t := range []string{th, "1"} {
		rows = append(rows, parityRow{
			name: "gemm-" + t + "t", title: "native GEMM " + c.gemmShape + ", " + t + " thread(s) (PyTorch: torch.matmul)",
			hilbert:  []string{"gemm", "-shapes", c.gemmShape, "-gemms", "native", "-threads", t, "-reps", itoa(c.gemmReps), "-budget", "5s"},
			pytorch:  []string{"gemm", "--shape", c.gemmShape, "--threads", t, "--reps", itoa(c.gemmReps)},
			measures: []parityMeasure{gflopsPerS},
		})
	}
	paper := func(name, title, autocast string, ld [2]int) parityRow {
		l, d := itoa(ld[0]), itoa(ld[1])
		r := parityRow{
			name: name, title: title,
			hilbert: []string{"model", "-model", "paper", "-preset", c.paperPreset, "-layers", l, "-dim", d,
				"-batch", itoa(c.batch), "-seq", itoa(c.seq), "-steps", steps, "-update", updateRecipe, "-autocast", autocast},
			pytorch: []string{"paper", "--layers", l, "--dim", d, "--batch", itoa(c.batch), "--seq", itoa(c.seq),
				"--steps", steps, "--update", "paper", "--autocast", autocast, "--threads", th},
			measures: []parityMeasure{tokensPerS},
		}
		if autocast == "off" {
			r.flopsPerToken = paperFlops(ld[0], ld[1], c.seq)
		}
		return r
	}
	gpt2 := func(name, title string, lds [3]int, batch int) parityRow {
		l, d, h := itoa(lds[0]), itoa(lds[1]), itoa(lds[2])
		return parityRow{
			name: name, title: title,
			hilbert: []string{"model", "-model", "gpt2", "-preset", c.gpt2Preset, "-layers", l, "-dim", d, "-heads", h,
				"-batch", itoa(batch), "-seq", itoa(c.seq), "-steps", steps, "-update", updateAdamW},
			pytorch: []string{"gpt2", "--layers", l, "--dim", d, "--heads", h, "--batch", itoa(batch), "--seq", itoa(c.seq),
				"--steps", steps, "--update", "adamw", "--threads", th},
			measures:      []parityMeasure{tokensPerS},
			flopsPerToken: gpt2Flops(lds[0], lds[1], c.seq),
		}
	}
	shape := func(ld [2]int) string { return "d " + itoa(ld[1]) + ", " + itoa(ld[0]) + " layers" }
	rows = append(rows,
		paper("paper-d"+itoa(c.paperSmall[1]), "full paper update "+shape(c.paperSmall), "off", c.paperSmall),
		paper("paper-d"+itoa(c.paperLarge[1]), "full paper update "+shape(c.paperLarge), "off", c.paperLarge),
		gpt2("gpt2-d"+itoa(c.gpt2Small[1]), "GPT-2 L"+itoa(c.gpt2Small[0])+" d"+itoa(c.gpt2Small[1])+" H"+itoa(c.gpt2Small[2])+", AdamW + clip", c.gpt2Small, c.batch),
		gpt2("gpt2-"+gpt2SizeName(c.gpt2Large), "GPT-2 L"+itoa(c.gpt2Large[0])+" d"+itoa(c.gpt2Large[1])+", "+itoa(c.gpt2Batch)+" seqs, AdamW + clip", c.gpt2Large, c.gpt2Batch),
		llamaParityRow(c, c.llamaLayers[0]),
		llamaParityRow(c, c.llamaLayers[1]),
		paper("bf16-d"+itoa(c.paperSmall[1]), "paper update "+shape(c.paperSmall)+", autocast bf16", "bf16", c.paperSmall),
		paper("bf16-d"+itoa(c.paperLarge[1]), "paper update "+shape(c.paperLarge)+", autocast bf16", "bf16", c.paperLarge),
	)
	for _, b := range c.genBatches {
		l, d, h := itoa(c.gpt2Large[0]), itoa(c.gpt2Large[1]), itoa(c.gpt2Large[2])
		rows = append(rows, genParityRow(c, "gen-b"+itoa(b), "GPT-2 L"+l+" d"+d, b,
			[]string{"-model", "gpt2", "-preset", c.gpt2Preset, "-layers", l, "-dim", d, "-heads", h},
			[]string{"--model", "gpt2", "--layers", l, "--dim", d, "--heads", h}))
	}
	cfg, py := llamaArgs(c, c.llamaLayers[1])
	for _, b := range c.genBatches {
		rows = append(rows, genParityRow(c, "gen-llama-b"+itoa(b), c.llamaPreset+" L"+itoa(cfg.Layers)+" d"+itoa(cfg.Dim)+" (GQA)", b,
			[]string{"-model", "llama", "-preset", c.llamaPreset, "-layers", itoa(cfg.Layers)}, append([]string{"--model", "llama"}, py...)))
	}
	return rows
}

// genParityRow is a generation row: model (hilbert's and bench.py's flags
// for it) at batch b, c's prompt and new tokens, greedy with the KV cache.
func genParityRow(c parityConfig, name, model string, b int, hilbert, pytorch []string) parityRow {
	itoa := strconv.Itoa
	return parityRow{
		name:  name,
		title: model + " generation, batch " + itoa(b) + ", prompt " + itoa(c.genPrompt) + ", " + itoa(c.genTokens) + " tokens, greedy, KV cache",
		hilbert: append(append([]string{"generate"}, hilbert...),
			"-batch", itoa(b), "-prompt", itoa(c.genPrompt), "-tokens", itoa(c.genTokens), "-reps", "1"),
		pytorch: append(append([]string{"generate"}, pytorch...), "--batch", itoa(b),
			"--prompt", itoa(c.genPrompt), "--tokens", itoa(c.genTokens), "--reps", "1", "--threads", itoa(c.threads)),
		measures: []parityMeasure{
			{label: "decode tokens/s", hilbertKey: "decode_tokens_per_s", pytorchKey: "decode_tokens_per_s"},
			{label: "prefill tokens/s", hilbertKey: "prefill_tokens_per_s", pytorchKey: "prefill_tokens_per_s"},
			{label: "ms a token", hilbertKey: "ms_per_token", pytorchKey: "ms_per_token", lowerBetter: true},
		},
	}
}

// llamaParityRow is the Llama row of c: its preset cut to layers blocks
// (0: whole), AdamW on every parameter and clipping on both sides.
func llamaParityRow(c parityConfig, layers int) parityRow {
	itoa := strconv.Itoa
	steps, th := itoa(c.steps), itoa(c.threads)
	name := "llama-" + strings.TrimPrefix(strings.TrimPrefix(c.llamaPreset, "smollm-"), "llama-")
	cfg, py := llamaArgs(c, layers)
	hilbert := []string{"model", "-model", "llama", "-preset", c.llamaPreset}
	if layers > 0 {
		name += "-l" + itoa(layers)
		hilbert = append(hilbert, "-layers", itoa(layers))
	}
	return parityRow{
		name: name,
		title: c.llamaPreset + " shape (Llama: RMSNorm, RoPE, GQA " + itoa(cfg.Heads) + "/" + itoa(cfg.KVHeads) +
			" heads, SwiGLU, tied head), L" + itoa(cfg.Layers) + " d" + itoa(cfg.Dim) + ", " + itoa(c.gpt2Batch) + " seqs, AdamW + clip",
		hilbert: append(hilbert, "-batch", itoa(c.gpt2Batch), "-seq", itoa(c.seq), "-steps", steps, "-update", updateAdamW),
		pytorch: append(append([]string{"llama"}, py...),
			"--batch", itoa(c.gpt2Batch), "--seq", itoa(c.seq), "--steps", steps, "--update", "adamw", "--threads", th),
		measures:      []parityMeasure{tokensPerS},
		flopsPerToken: llamaFlops(cfg, c.seq),
	}
}

// llamaArgs returns c's Llama preset cut to layers blocks (0: whole) and
// bench.py's flags for its shape.
func llamaArgs(c parityConfig, layers int) (models.LlamaConfig, []string) {
	itoa := strconv.Itoa
	cfg, err := models.LlamaPreset(c.llamaPreset)
	if err != nil {
		panic(err) // the config's preset is one of the package's
	}
	if layers > 0 {
		cfg.Layers = layers
	}
	return cfg, []string{"--layers", itoa(cfg.Layers), "--dim", itoa(cfg.Dim), "--heads", itoa(cfg.Heads),
		"--kv-heads", itoa(cfg.KVHeads), "--mlp", itoa(cfg.MLPHidden), "--vocab", itoa(cfg.Vocab),
		"--theta", strconv.FormatFloat(cfg.RoPETheta, 'g', -1, 64), "--eps", strconv.FormatFloat(cfg.NormEps, 'g', -1, 64)}
}

// gpt2SizeName names GPT-2 shapes by their parameter count where they are
// GPT-2's (124m), by their width otherwise.
func gpt2SizeName(lds [3]int) string {
	if lds == [3]int{12, 768, 12} {
		return "124m"
	}
	return "d" + strconv.Itoa(lds[1]) + "l" + strconv.Itoa(lds[0])
}

// selectRows returns the rows named in list (comma-separated names or
// groups: all, gemm, update, gpt2, llama, bf16, gen; a name's prefix picks a
// group), in table order.
func selectRows(all []parityRow, list string) ([]parityRow, []string) {
	var bad []string
	keep := map[string]bool{}
	for _, w := range strings.Split(list, ",") {
		w = strings.TrimSpace(w)
		if w == "" {
			continue
		}
		found := false
		for _, r := range all {
			group := strings.SplitN(r.name, "-", 2)[0]
			if w == "all" || w == r.name || w == group || w == "update" && group == "paper" {
				keep[r.name], found = true, true
			}
		}
		if !found {
			bad = append(bad, w)
		}
	}
	var rows []parityRow
	for _, r := range all {
		if keep[r.name] {
			rows = append(rows, r)
		}
	}
	return rows, bad
}
