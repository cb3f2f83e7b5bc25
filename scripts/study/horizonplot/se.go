package main

// The validation pieces and the standard errors over them.

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/hilbert-ml/hilbert/scripts/study/internal/study"
)

// readSources reads valchunks/sources.tsv: the book of each piece.
func readSources(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 2 || fields[0] == "piece" {
			continue
		}
		i, err := strconv.Atoi(fields[0])
		if err != nil || i != len(out) {
			return nil, fmt.Errorf("%s: line %q: want piece %d", path, sc.Text(), len(out))
		}
		out = append(out, fields[1])
	}
	return out, sc.Err()
}

// readPieces reads a run's valpieces.tsv (nil, nil when there is none).
func readPieces(path string, n int) ([]float64, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := make([]float64, n)
	got := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 2 || fields[0] == "piece" {
			continue
		}
		i, err1 := strconv.Atoi(fields[0])
		v, err2 := strconv.ParseFloat(fields[1], 64)
		if err1 != nil || err2 != nil || i < 0 || i >= n {
			return nil, fmt.Errorf("%s: line %q: want a piece below %d and its loss", path, sc.Text(), n)
		}
		out[i] = v
		got++
	}
	if got != n {
		return nil, fmt.Errorf("%s: %d pieces, want %d", path, got, n)
	}
	return out, sc.Err()
}

// stratifiedSE is the standard error of the mean of v (one value per
// piece, equal-sized pieces) with the pieces stratified by source:
// se^2 = sum_f w_f^2 s_f^2 / n_f, w_f = n_f / n. NaN when v is nil.
func stratifiedSE(v []float64, source []string) float64 {
	if v == nil {
		return math.NaN()
	}
	by := map[string][]float64{}
	for i, x := range v {
		by[source[i]] = append(by[source[i]], x)
	}
	var se2 float64
	n := float64(len(v))
	for _, xs := range by {
		w := float64(len(xs)) / n
		s := study.SD(xs)
		se2 += w * w * s * s / float64(len(xs))
	}
	return math.Sqrt(se2)
}

// pieceSizeTable is the batch-means check of the standard errors: the
// per-run se and the paired se of the loss cost (over the finished pairs)
// with the pieces taken one, two and four at a time (groups of
// consecutive pieces within one book). Batch means is sound once the pieces are longer than the
// correlation of the losses along the text; an se that stays put as the
// pieces grow says they are.
func pieceSizeTable(keys []runKey, res map[runKey]run, sources []string) string {
	var b strings.Builder
	b.WriteString("\nThe standard errors by piece length (batch means: they should not grow once the pieces are longer than the correlation along the text); range over the runs and over the AdamW/RowNorm pairs with pieces:\n\n")
	b.WriteString("| pieces | tokens a piece | per-run se | paired se of the loss cost |\n|---|---|---|---|\n")
	for _, k := range []int{1, 2, 4} {
		var one, paired []float64
		var n int
		for _, key := range keys {
			f := res[key]
			if f.pieces == nil || !finished(key, f) {
				continue
			}
			v, src := groupPieces(f.pieces, sources, k)
			n = len(v)
			one = append(one, stratifiedSE(v, src))
			if key.head != "adamw" {
				continue
			}
			rk := runKey{key.d, key.tpp, "rownorm", key.seed}
			if r, ok := res[rk]; ok && r.pieces != nil && finished(rk, r) {
				rv, _ := groupPieces(r.pieces, sources, k)
				paired = append(paired, pairedSE(v, rv, src))
			}
		}
		if len(one) == 0 {
			return ""
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %s |\n", n, k*pieceTokens, rangeOf(one), rangeOf(paired))
	}
	return b.String()
}

// pieceTokens is the length of one validation piece (horizondata's 64
// pieces of 89 sequences of 128 tokens).
const pieceTokens = 89 * 128

// groupPieces averages v over groups of k consecutive pieces within each
// run of pieces from one book (a book's last pieces, fewer than k, are
// left out) and returns the group means and their books.
func groupPieces(v []float64, source []string, k int) ([]float64, []string) {
	var out []float64
	var src []string
	for lo := 0; lo < len(v); {
		hi := lo
		for hi < len(v) && source[hi] == source[lo] {
			hi++
		}
		for i := lo; i+k <= hi; i += k {
			out, src = append(out, study.Mean(v[i:i+k])), append(src, source[i])
		}
		lo = hi
	}
	return out, src
}

// rangeOf formats the smallest and largest of v to 4 decimals.
func rangeOf(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return fmt.Sprintf("%.4f-%.4f", lo, hi)
}

// pairedSE is the stratified standard error of the mean per-piece
// difference r - a.
func pairedSE(a, r []float64, source []string) float64 {
	if a == nil || r == nil {
		return math.NaN()
	}
	d := make([]float64, len(a))
	for i := range a {
		d[i] = r[i] - a[i]
	}
	return stratifiedSE(d, source)
}
