// Command horizonplot analyses the horizon study of issue 26: it reads the
// runs that scripts/study/horizon/run.sh made
// (RUNS/hz-d<d>-tpp<x>/<head>-seed<k>/metrics.jsonl and valpieces.tsv),
// pairs the AdamW and RowNorm runs of each width, horizon and seed, and
// writes
//
//   - OUT/horizon.md: per run the final validation loss, D(S_T), the head's
//     lr_T, D(S_T)/(2 lr_T) and Hilbert RMS; per width and horizon the loss
//     cost (RowNorm minus AdamW) with its seed spread and standard error,
//     the AdamW/RowNorm ratios of D(S_T) and Hilbert RMS and their values
//     over training; at 20 tokens per parameter the fit ratio = c d^a
//     beside the paper's Table 3;
//   - OUT/loss_cost.png, OUT/ratio_diameter.png, OUT/ratio_hilbert_rms.png:
//     the loss cost and both ratios against tokens per parameter, one
//     series per width.
//
// The standard errors come from each run's loss on the 64 contiguous
// validation pieces (valpieces.tsv), by batch means stratified by the
// piece's book (DATA/valchunks/sources.tsv): se^2 = sum_f w_f^2 s_f^2 / n_f.
//
// usage: go run ./scripts/study/horizonplot -runs WORKDIR/runs -data WORKDIR/data -out docs/results/horizon
package main

import (
	"cmp"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hilbert-ml/hilbert/scripts/study/internal/study"
)

// The paper's Table 3 at 20 tokens per parameter (190M, 380M, 640M on
// FineWeb, mean over 3 seeds): widths, AdamW/RowNorm ratios, loss cost.
var (
	paperD    = []float64{512, 768, 1024}
	paperDiam = []float64{2.870e-2 / 6.369e-4, 2.303e-2 / 4.241e-4, 1.895e-2 / 3.1856e-4}
	paperHRMS = []float64{9.076e-2 / 7.506e-3, 7.732e-2 / 5.667e-3, 7.555e-2 / 4.955e-3}
	paperCost = []float64{3.1741 - 3.1588, 2.9494 - 2.9403, 2.8213 - 2.8156}
)

// The study's model: 2 blocks of 16 d^2 parameters, embedding and head of
// V x d, 2,048 tokens per update.
const (
	vocab          = 1024
	tokensPerStep  = 2048
	longestHorizon = 20.0
)

// params is the model's parameter count at width d.
func params(d int) int { return 32*d*d + 2*vocab*d }

// steps is the schedule length T of a horizon, as run.sh computes it.
func steps(d int, tpp float64) int {
	return int(tpp*float64(params(d))/tokensPerStep + 0.5)
}

// runKey names one run: width, horizon (tokens per parameter), head
// optimizer and seed.
type runKey struct {
	d    int
	tpp  float64
	head string
	seed int
}

// run is one run's final records and its per-piece validation losses.
type run struct {
	study.Run
	pieces []float64 // loss on each validation piece (nil: not measured)
}

// cell is one width and horizon: the paired runs of its seeds.
type cell struct {
	d     int
	tpp   float64
	seeds []int
	a, r  []run // AdamW and RowNorm, by seed
}

// main reads the runs, writes horizon.md and the figures into -out and
// prints horizon.md.
func main() {
	runsDir := flag.String("runs", "runs", "folder holding the hz-d<d>-tpp<x>/<head>-seed<k> runs")
	dataDir := flag.String("data", "data", "the study's data folder (for valchunks/sources.tsv)")
	out := flag.String("out", "docs/results/horizon", "output folder")
	flag.Parse()
	log.SetFlags(0)

	sources, err := readSources(filepath.Join(*dataDir, "valchunks", "sources.tsv"))
	study.Check(err)
	keys, res, err := loadRuns(*runsDir, len(sources))
	study.Check(err)
	order, cells := pairCells(keys, res)
	md := report(keys, res, sources, order, cells)
	study.Check(os.MkdirAll(*out, 0o755))
	study.Check(os.WriteFile(filepath.Join(*out, "horizon.md"), []byte(md), 0o644))
	study.Check(drawFigures(*out, order, cells))
	fmt.Print(md)
}

// loadRuns reads every run under runsDir
// (hz-d<d>-tpp<x>/<head>-seed<k>/metrics.jsonl, and valpieces.tsv beside
// it when there, of n pieces) and returns their keys, ordered by width,
// horizon, head and seed, and the runs by key. A folder that does not match
// the pattern is skipped; none found is an error.
func loadRuns(runsDir string, n int) ([]runKey, map[runKey]run, error) {
	re := regexp.MustCompile(`hz-d(\d+)-tpp([0-9.]+)/(adamw|rownorm)-seed(\d+)/metrics\.jsonl$`)
	paths, _ := filepath.Glob(filepath.Join(runsDir, "hz-d*-tpp*", "*-seed*", "metrics.jsonl"))
	res := map[runKey]run{}
	var keys []runKey
	for _, p := range paths {
		m := re.FindStringSubmatch(filepath.ToSlash(p))
		if m == nil {
			continue
		}
		d, _ := strconv.Atoi(m[1])
		tpp, _ := strconv.ParseFloat(m[2], 64)
		s, _ := strconv.Atoi(m[4])
		f, err := study.ReadRun(p)
		if err != nil {
			return nil, nil, err
		}
		r := run{Run: f}
		r.pieces, err = readPieces(filepath.Join(filepath.Dir(p), "valpieces.tsv"), n)
		if err != nil {
			return nil, nil, err
		}
		k := runKey{d, tpp, m[3], s}
		res[k], keys = r, append(keys, k)
	}
	if len(keys) == 0 {
		return nil, nil, fmt.Errorf("horizonplot: no runs under %s", runsDir)
	}
	slices.SortFunc(keys, runKey.compare)
	return keys, res, nil
}

// compare orders run keys by width, horizon, head and seed.
func (a runKey) compare(b runKey) int {
	return cmp.Or(cmp.Compare(a.d, b.d), cmp.Compare(a.tpp, b.tpp), strings.Compare(a.head, b.head), cmp.Compare(a.seed, b.seed))
}

// finished says whether run f reached the end of k's schedule with a
// validation, D(S_T) and Hilbert RMS logged.
func finished(k runKey, f run) bool {
	return f.Step >= steps(k.d, k.tpp) && f.HasVal && f.HasD && f.HasRMS
}

// pairCells gathers the pairs of finished runs (AdamW and RowNorm of one
// seed) into a cell per width and horizon, and returns the cells' ids
// ({d, tokens per parameter}) in the order of keys, and the cells by id.
func pairCells(keys []runKey, res map[runKey]run) ([][2]float64, map[[2]float64]*cell) {
	cells := map[[2]float64]*cell{}
	var order [][2]float64
	for _, k := range keys {
		if k.head != "adamw" {
			continue
		}
		rk := runKey{k.d, k.tpp, "rownorm", k.seed}
		a, r := res[k], res[rk]
		if !finished(k, a) || !finished(rk, r) {
			continue
		}
		id := [2]float64{float64(k.d), k.tpp}
		c := cells[id]
		if c == nil {
			c = &cell{d: k.d, tpp: k.tpp}
			cells[id] = c
			order = append(order, id)
		}
		c.seeds, c.a, c.r = append(c.seeds, k.seed), append(c.a, a), append(c.r, r)
	}
	return order, cells
}
