package cli

// A run's data: the shards it names, or its text (the default job's:
// Opticks) tokenized into the run's folder and checked on resume.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/hilbert-ml/hilbert/data"
	"github.com/hilbert-ml/hilbert/train"
)

// preparedData is what prepareData made.
type preparedData struct {
	// mismatch: a resume's text tokenized to other data than its
	// checkpoint trained on; the job points at the temporary folder, so
	// that Resume lists the differences, and the run's folder is as it was.
	mismatch bool
	// tmp is the temporary folder that cleanup removes, if any.
	tmp string
}

func (p preparedData) cleanup() {
	if p.tmp != "" {
		os.RemoveAll(p.tmp)
	}
}

func (p preparedData) mismatchError() error {
	return errors.New("-resume: -text tokenizes to other data than the checkpoint trained on (its train_data and val_data fingerprints differ); the run's data folder is unchanged: give the run's original -text, or start over with -overwrite or another -name")
}

// prepareData tokenizes the job's text (or the default Opticks) into
// shards in the run's data folder when no shards are given. The text is
// tokenized into a temporary folder first, which replaces the run's data
// folder only when the run may train on it: a fresh run, or a resume whose
// checkpoint trained on the same data (train.DataMatchesCheckpoint).
// Otherwise the run's data stay as they were, byte for byte, and the job
// points at the temporary folder (removed by cleanup) for Resume to refuse
// with the list of differences. The run's lock must be held.
func prepareData(ctx context.Context, job *trainFile, resume bool, stderr io.Writer) (preparedData, error) {
	if len(job.Config.TrainShards) > 0 {
		return preparedData{}, nil
	}
	if len(job.Text) == 0 {
		opticks, err := opticksPath()
		if err != nil {
			return preparedData{}, err
		}
		job.Text = []string{opticks}
	}
	c := &job.Config
	run := filepath.Join(c.RunsDir, c.Name)
	dir := filepath.Join(run, "data")
	tmp, old := filepath.Join(run, ".data-new"), filepath.Join(run, ".data-old")
	// Left by a process that died here (the lock is ours now).
	if err := removeAll(tmp, old); err != nil {
		return preparedData{}, err
	}
	pd := preparedData{tmp: tmp}
	sum, err := shardsFromText(ctx, job, tmp)
	if err != nil {
		return pd, err
	}
	tokenized := fmt.Sprintf("hilbert: tokenized %d documents (%d tokens, %d for validation) from %s",
		sum.Documents, sum.Tokens, sum.ValTokens, strings.Join(job.Text, ", "))
	if resume {
		same, err := train.DataMatchesCheckpoint(*c, c.TrainShards, c.ValShard)
		if err != nil {
			return pd, err
		}
		if !same {
			fmt.Fprintf(stderr, "%s: not the checkpoint's data, so %s is left as it is\n", tokenized, dir)
			pd.mismatch = true
			return pd, nil
		}
	}
	// Swap the new shards in: the old folder aside, the new one in its
	// place, the old one removed. A crash between the renames leaves no
	// data folder, which the next run (holding the lock) tokenizes again.
	if err := os.Rename(dir, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return pd, fmt.Errorf("-text: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return pd, fmt.Errorf("-text: %w", err)
	}
	if err := os.RemoveAll(old); err != nil {
		return pd, fmt.Errorf("-text: %w", err)
	}
	for i, p := range c.TrainShards {
		c.TrainShards[i] = filepath.Join(dir, filepath.Base(p))
	}
	c.ValShard = filepath.Join(dir, filepath.Base(c.ValShard))
	fmt.Fprintf(stderr, "%s into %s\n", tokenized, dir)
	return preparedData{}, nil
}

// removeAll removes each path and what it holds.
func removeAll(paths ...string) error {
	for _, p := range paths {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

// opticksPath finds the public-domain text every Go installation ships.
func opticksPath() (string, error) {
	var roots []string
	if r := os.Getenv("GOROOT"); r != "" {
		roots = append(roots, r)
	}
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		roots = append(roots, strings.TrimSpace(string(out)))
	}
	roots = append(roots, runtime.GOROOT())
	for _, r := range roots {
		p := filepath.Join(r, "src", "testdata", "Isaac.Newton-Opticks.txt")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("the default job's text, src/testdata/Isaac.Newton-Opticks.txt, is in none of the Go roots %q; pass -text FILE or -train/-val shards", roots)
}

// shardsFromText tokenizes the job's text files into shards in the
// folder dir as prepare does (data.AddTextFile: plain or gzip text,
// one document per blank-line-separated paragraph), sending the first
// TextValTokens tokens to validation, and points the job at them.
func shardsFromText(ctx context.Context, job *trainFile, dir string) (data.Summary, error) {
	c := &job.Config
	sum, err := data.BuildFromTextFiles(ctx, data.BuildConfig{
		Dir: dir, Prefix: "text", Overwrite: true,
		Split: data.Split{ValTokens: job.TextValTokens},
	}, job.Text...)
	if errors.Is(err, data.ErrNoTraining) || err == nil && (len(sum.TrainShards) == 0 || len(sum.ValShards) == 0) {
		return sum, fmt.Errorf("-text: %d tokens are too few for a training and a validation split of %d tokens", sum.Tokens, job.TextValTokens)
	}
	if err != nil {
		return sum, fmt.Errorf("-text: %w", err)
	}
	c.TrainShards, c.ValShard = sum.TrainShards, sum.ValShards[0]
	return sum, nil
}
