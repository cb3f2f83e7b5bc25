package study

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestFit(t *testing.T) {
	for _, tc := range []struct {
		name        string
		x, y        []float64
		c, a, se    float64
		tolC, tolSE float64
	}{
		// An exact power law: the line passes through every point.
		{"exact", []float64{64, 128, 256}, []float64{3 * 8, 3 * math.Sqrt(128), 48}, 3, 0.5, 0, 1e-12, 1e-12},
		// Two points: no residual freedom, se 0.
		{"two", []float64{2, 4}, []float64{1, 4}, 0.25, 2, 0, 1e-12, 0},
		// log y = 0, 1, 0 at log x = 0, 1, 2: slope 0, intercept 1/3,
		// residuals -1/3, 2/3, -1/3 (rss 2/3, n-2 = 1, Sxx = 2).
		{"residuals", []float64{1, math.E, math.E * math.E}, []float64{1, math.E, 1}, math.Exp(1.0 / 3), 0, math.Sqrt(2.0 / 3 / 2), 1e-12, 1e-12},
	} {
		c, a, se := Fit(tc.x, tc.y)
		if math.Abs(c-tc.c) > tc.tolC*tc.c || math.Abs(a-tc.a) > 1e-12 || math.Abs(se-tc.se) > tc.tolSE+1e-15 {
			t.Errorf("%s: c %g a %g se %g, want %g %g %g", tc.name, c, a, se, tc.c, tc.a, tc.se)
		}
	}
}

func TestSummaries(t *testing.T) {
	v := []float64{1, 2, 4}
	if m := Mean(v); m != 7.0/3 {
		t.Errorf("Mean = %g", m)
	}
	// Deviations -4/3, -1/3, 5/3: sum of squares 42/9, over 2.
	if sd := SD(v); math.Abs(sd-math.Sqrt(42.0/18)) > 1e-15 {
		t.Errorf("SD = %g", sd)
	}
	if SD([]float64{3}) != 0 || PM([]float64{3}, 2) != "" {
		t.Error("one value: want no spread")
	}
	if got := PM([]float64{1, 3}, 3); got != " ± 1.414" {
		t.Errorf("PM = %q", got)
	}
	if got := Floats([]float64{1, 2.25}, 1) + "|" + Ints([]int{3, 4}); got != "1.0, 2.2|3,4" {
		t.Errorf("Floats|Ints = %q", got)
	}
}

func TestReadRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	lines := `{"step":0,"loss":0,"lr_scale":0,"grad_norm":0,"tokens":0,"tokens_per_s":0,"elapsed_s":0,"val_loss":6.9}
{"step":1,"loss":6,"lr_scale":0.5,"grad_norm":1,"tokens":2048,"tokens_per_s":1000,"elapsed_s":2,"diameter":0.02,"head_lr":0.01}
{"step":2,"loss":5,"lr_scale":1,"grad_norm":1,"tokens":4096,"tokens_per_s":1000,"elapsed_s":4,"val_loss":5.5,"diameter":0.019,"head_lr":0.0095,"hilbert_rms":0.1}
{"step":3,"loss":4,"lr_sc`
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := ReadRun(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Step != 2 || r.Tokens != 4096 || r.ValLoss != 5.5 || r.Diam != 0.019 || r.HeadLR != 0.0095 || r.HRMS != 0.1 ||
		r.TokensPerS != 1024 || !r.HasVal || !r.HasD || !r.HasRMS {
		t.Errorf("last update: %+v", r)
	}
	if r.ValAt[0] != 6.9 || r.DiamAt[1] != 0.02 || r.LRAt[1] != 0.01 || len(r.HRMSAt) != 1 {
		t.Errorf("by update: val %v diam %v lr %v rms %v", r.ValAt, r.DiamAt, r.LRAt, r.HRMSAt)
	}
}
