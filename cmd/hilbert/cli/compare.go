package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hilbert-ml/hilbert/train"
)

func init() {
	register(subcommand{
		name:    "compare",
		summary: "train the AdamW and RowNorm heads for several seeds and write the Table-3 report",
		run:     runCompare,
	})
}

const compareUsage = `usage: hilbert compare [train flags] [-head-optimizers adamw,rownorm] [-seeds 0,1,2]

Runs the same job (every train flag applies; with none, the embedded Opticks
default) once per head optimizer and seed, on the same data in the same
order, into RUNS/NAME/<head>-seed<k>, and writes RUNS/NAME/compare.md with
the paper's Table 3 (final validation loss, D(S_T), Hilbert RMS: mean and
sample standard deviation over seeds, and the AdamW/RowNorm ratios) and
overlay plots. A run that already has a checkpoint is continued, so an
interrupted comparison (exit status 130) resumes where it stopped when run
again with the same command; -overwrite starts every run over.

-heads, the old name of -head-optimizers (it never meant attention heads),
is accepted for this release with a warning.

flags:
`

func runCompare(args []string, stdout, stderr io.Writer) error {
	heads, seeds := "adamw,rownorm", "0,1,2"
	st, err := parseTrainFlags("compare", compareUsage, args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&heads, "head-optimizers", heads, "comma-separated LM-head optimizers (adamw, rownorm)")
		fs.Func("heads", "deprecated: the old name of -head-optimizers", func(v string) error {
			fmt.Fprintln(stderr, "hilbert compare: -heads is deprecated and will be removed: use -head-optimizers (config key head_optimizers)")
			heads = v
			return nil
		})
		fs.StringVar(&seeds, "seeds", seeds, "comma-separated model seeds")
	})
	if st == nil || err != nil {
		return err
	}
	seedList, err := parseSeeds(seeds)
	if err != nil {
		return usageErr("compare", err)
	}
	headList, err := parseHeadOptimizers(heads)
	if err != nil {
		return usageErr("compare", err)
	}
	if st.resume {
		return usageErr("compare", errors.New("compare continues every run that has a checkpoint by itself: drop -resume"))
	}
	if !st.set["name"] {
		st.job.Config.Name = "opticks-compare"
	}
	ctx, stop := trainSignals(stderr, false)
	defer stop()
	// The comparison's folder (its data, compare.md) is locked first, then
	// each run's own folder as it trains.
	lock, err := lockRun(st, st.job.Config, stderr)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	pd, err := prepareData(ctx, &st.job, false, stderr)
	defer pd.cleanup()
	if err != nil {
		return err
	}
	base := st.job.Config
	dir := filepath.Join(base.RunsDir, base.Name)
	var results []train.RunResult
	for _, h := range headList {
		for _, seed := range seedList {
			c := base
			c.Head, c.Seed = h, seed
			c.RunsDir, c.Name = dir, fmt.Sprintf("%s-seed%d", c.Head, seed)
			r, err := compareRun(ctx, st, c, stdout, stderr)
			if err != nil {
				return err
			}
			results = append(results, r)
		}
	}
	cmp, err := train.WriteComparison(dir, "Head-geometry comparison: "+base.Name, results)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, "\n"+cmp.Markdown())
	fmt.Fprintf(stdout, "report: %s\n", filepath.Join(dir, "compare.md"))
	return nil
}

// compareRun trains (or continues) one run of a comparison under its own
// lock and prints its line.
func compareRun(ctx context.Context, st *trainSetup, c train.Config, stdout, stderr io.Writer) (train.RunResult, error) {
	resume := train.HasCheckpoint(c) && !st.overwrite
	runLock, err := lockRun(st, c, stderr)
	if err != nil {
		return train.RunResult{}, fmt.Errorf("%s: %w", c.Name, err)
	}
	if err := startRun(st, c, resume); err != nil {
		runLock.Unlock()
		return train.RunResult{}, fmt.Errorf("%s: %w", c.Name, err)
	}
	s, err := trainOne(ctx, st, c, runLock, resume, nil, stdout, stderr)
	if ie, ok := err.(*interruptedError); ok {
		if ie.hint != "" { // compare resumes by itself: no -resume
			ie.hint = "The comparison continues where it stopped when run again with the same command"
		}
		return train.RunResult{}, ie
	}
	if err != nil {
		return train.RunResult{}, fmt.Errorf("%s: %w", c.Name, err)
	}
	fmt.Fprintf(stdout, "%s: val loss %.4f, D(S_T) %.4g, Hilbert RMS %.4g, %.0f tokens/s\n",
		c.Name, s.ValLoss, s.Diameter, s.HilbertRMS, s.TokensPerS)
	return train.RunResult{Summary: s.Summary, History: s.History}, nil
}

// parseHeadOptimizers reads -head-optimizers: adamw and rownorm, comma
// separated, at least one.
func parseHeadOptimizers(heads string) ([]string, error) {
	var list []string
	for _, h := range strings.Split(heads, ",") {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			if h != "adamw" && h != "rownorm" {
				return nil, fmt.Errorf("-head-optimizers %q: %q: want adamw or rownorm", heads, h)
			}
			list = append(list, h)
		}
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("-head-optimizers %q: none", heads)
	}
	return list, nil
}

func parseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("-seeds %q: %w", s, err)
		}
		out = append(out, v)
	}
	return out, nil
}
