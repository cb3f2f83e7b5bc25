package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/hilbert-ml/hilbert/data"
)

func init() {
	register(subcommand{
		name:    "prepare",
		summary: "tokenize text, Parquet or Arrow files into llm.c .bin shards",
		run:     runPrepare,
	})
}

const prepareUsage = `usage: hilbert prepare -out DIR [flags] INPUT...
       hilbert prepare -manifest DIR

Tokenizes INPUT files with GPT-2's tokenizer into llm.c shards
DIR/PREFIX_train_NNNNNN.bin and DIR/PREFIX_val_NNNNNN.bin, each document
preceded by <|endoftext|> (50256). Inputs are chosen by extension: .parquet
(Hugging Face FineWeb), .arrow/.arrows/.ipc/.feather (Arrow IPC), anything
else UTF-8 text, plain or gzip (told by its first bytes), one document per
blank-line-separated paragraph, as train -text reads it; a binary file is
refused. Glob patterns are expanded. Existing shards are kept unless
-overwrite is given.

When every shard is written, DIR/manifest.json lists them with their token
counts and CRC-32C checksums; train refuses shards whose folder has no
manifest, or one they do not match, so a prepare that did not finish is
never trained on. -manifest DIR writes the manifest for shards made
elsewhere (llm.c's downloaded FineWeb shards): it reads each in full.

flags:
`

// runPrepare is the prepare subcommand.
func runPrepare(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("prepare", prepareUsage, stderr)
	out := fs.String("out", "", "directory that receives the shards (required)")
	prefix := fs.String("prefix", "fineweb", "shard name prefix")
	shardTokens := fs.Int("shard-tokens", data.DefaultShardTokens, "tokens per shard")
	valTokens := fs.Int("val-tokens", 0, "send the first N tokens to validation (llm.c uses 100000000)")
	valEvery := fs.Int("val-every", 0, "send every N-th document (0, N, 2N, ...) to validation")
	column := fs.String("column", "text", "Parquet/Arrow column: text (string, large_string) or token ids (list of integers)")
	batchRows := fs.Int("batch-rows", 1024, "rows per record batch read from Parquet")
	overwrite := fs.Bool("overwrite", false, "replace existing shards with the same prefix in -out")
	quiet := fs.Bool("quiet", false, "no progress bar")
	manifest := fs.String("manifest", "", "write DIR/manifest.json for the .bin shards already in DIR (no inputs)")
	if stop, err := parseCommandArgs(fs, args); stop {
		return err
	}
	if *manifest != "" {
		if *out != "" || fs.NArg() > 0 {
			return usageErr(fs.Name(), errors.New("-manifest DIR takes no -out and no inputs"))
		}
		return prepareManifest(*manifest, stdout)
	}
	if *out == "" || fs.NArg() == 0 {
		return usageErr(fs.Name(), errors.New("-out and at least one input are required"))
	}
	inputs, total, err := expandInputs(fs.Args())
	if err != nil {
		return err
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(stderr),
		progressbar.OptionSetDescription("tokenizing"),
		progressbar.OptionShowBytes(true),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionSetVisibility(!*quiet),
	)
	cfg := data.BuildConfig{
		Dir:         *out,
		Prefix:      *prefix,
		ShardTokens: *shardTokens,
		Split:       data.Split{ValTokens: *valTokens, ValEvery: *valEvery},
		Overwrite:   *overwrite,
		Column:      *column,
		BatchRows:   *batchRows,
		Progress:    func(d int64) { bar.Add64(d) },
	}
	sum, err := data.BuildFromFiles(context.Background(), cfg, inputs...)
	bar.Finish()
	if !*quiet {
		fmt.Fprintln(stderr)
	}
	if errors.Is(err, data.ErrNoTraining) && *valTokens > 0 && int64(*valTokens) >= sum.Tokens {
		return fmt.Errorf("-val-tokens %d is at or above the %d tokens of the input: no tokens are left for training shards (the validation shards were written, without a manifest)", *valTokens, sum.Tokens)
	}
	if err != nil {
		return err
	}
	secs := sum.Elapsed.Seconds()
	fmt.Fprintf(stdout, "documents %d (null rows skipped %d)\n", sum.Documents, sum.Nulls)
	fmt.Fprintf(stdout, "tokens    %d (validation %d)\n", sum.Tokens, sum.ValTokens)
	fmt.Fprintf(stdout, "shards    %d train, %d validation in %s, listed in %s\n", len(sum.TrainShards), len(sum.ValShards), *out, data.ManifestName)
	fmt.Fprintf(stdout, "text      %.1f MB in %.1fs: %.1f MB/s\n", float64(sum.TextBytes)/1e6, secs, float64(sum.TextBytes)/1e6/max(secs, 1e-9))
	return nil
}

// prepareManifest is prepare -manifest DIR: it writes the manifest of the
// shards in dir and prints what it lists.
func prepareManifest(dir string, stdout io.Writer) error {
	start := time.Now()
	m, err := data.WriteManifest(dir)
	if err != nil {
		return err
	}
	var tokens int64
	train := 0
	for _, s := range m.Shards {
		tokens += s.Tokens
		if s.Split == "train" {
			train++
		}
	}
	fmt.Fprintf(stdout, "manifest  %s: %d train, %d validation shards, %d tokens, checked in %.1fs\n",
		filepath.Join(dir, data.ManifestName), train, len(m.Shards)-train, tokens, time.Since(start).Seconds())
	return nil
}

// expandInputs expands the input patterns (a pattern matching nothing is
// an error) and returns the files and their total size in bytes.
func expandInputs(patterns []string) ([]string, int64, error) {
	var inputs []string
	var total int64
	for _, pat := range patterns {
		m, err := filepath.Glob(pat)
		if err != nil {
			return nil, 0, fmt.Errorf("input %q: %w", pat, err)
		}
		if len(m) == 0 {
			return nil, 0, fmt.Errorf("input %q: %w", pat, os.ErrNotExist)
		}
		for _, p := range m {
			st, err := os.Stat(p)
			if err != nil {
				return nil, 0, err
			}
			total += st.Size()
			inputs = append(inputs, p)
		}
	}
	return inputs, total, nil
}
