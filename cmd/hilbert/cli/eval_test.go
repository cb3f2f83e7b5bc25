package cli

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvalMatchesTheRunsValidation checks that hilbert eval of a run's
// latest checkpoint on the run's validation shard gives the final
// validation loss the run logged (float32 tolerance), with the logged
// D(S_t) and Hilbert RMS of the last update; and that bad input is a
// clear error.
func TestEvalMatchesTheRunsValidation(t *testing.T) {
	run := tinyTextRun(t)
	val := filepath.Join(run, "data", "text_val_000000.bin")
	recs := metricsLines(t, filepath.Join(run, "metrics.jsonl"))
	last := recs[len(recs)-1]
	logged, ok := last["val_loss"].(float64)
	if !ok || last["step"].(float64) != 3 {
		t.Fatalf("last metrics record %v lacks the final validation", last)
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"the run's val_tokens", nil},
		{"explicit -val-tokens", []string{"-val-tokens", "300"}},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"eval", "-run", run, "-val", val}, c.args...)
		if code := Run(args, &stdout, &stderr); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, stderr.String())
		}
		var got float64
		var tokens int
		out := stdout.String()
		i := strings.Index(out, "val loss ")
		if i < 0 {
			t.Fatalf("%s: no val loss in %q", c.name, out)
		}
		if _, err := fmt.Sscanf(out[i:], "val loss %g over %d tokens", &got, &tokens); err != nil {
			t.Fatalf("%s: %q: %v", c.name, out, err)
		}
		if tokens != 288 { // 300 tokens in whole sequences of 32: 9 of them
			t.Errorf("%s: %d tokens, want 288", c.name, tokens)
		}
		if math.Abs(got-logged) > 1e-5*math.Abs(logged) {
			t.Errorf("%s: eval %.7f, the run logged %.7f", c.name, got, logged)
		}
		want := fmt.Sprintf("update 3: D(S_t) %.6g", last["diameter"].(float64))
		if !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf("Hilbert RMS %.6g", last["hilbert_rms"].(float64))) {
			t.Errorf("%s: %q lacks %q and the Hilbert RMS", c.name, out, want)
		}
	}
	// Fewer tokens give another loss: the prefix length is honoured.
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"eval", "-run", run, "-val", val, "-val-tokens", "40"}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "over 32 tokens") {
		t.Errorf("-val-tokens 40: exit %d, %q %q", code, stdout.String(), stderr.String())
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-val", val}, "-run: name the run's folder"},
		{[]string{"-run", run}, "-val: name the validation shard"},
		{[]string{"-run", run, "-val", filepath.Join(run, "nope.bin")}, "nope.bin"},
		{[]string{"-run", run, "-val", val, "-val-tokens", "10"}, "fewer than the run's seq_len+1 = 33"},
		{[]string{"-run", t.TempDir(), "-val", val}, "no checkpoint"},
	} {
		var stdout, stderr bytes.Buffer
		code := Run(append([]string{"eval"}, c.args...), &stdout, &stderr)
		if code == 0 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("eval %q: exit %d, stderr %q, want %q", c.args, code, stderr.String(), c.want)
		}
	}
}
