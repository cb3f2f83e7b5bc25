package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/schollz/progressbar/v3"

	"github.com/hilbert-ml/hilbert/train"
)

// The terminal's bar: after each update its last frame shows that
// update's count and loss, the last update's (100%) included; finish
// clears it.
func TestProgressBarShowsEveryUpdate(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{w: &buf, steps: 4, bar: newBar(&buf, 4, 0, progressbar.OptionSetWidth(20)), rownorm: true}
	val := 3.0
	for s := 0; s <= 4; s++ {
		buf.Reset()
		r := train.Record{Step: s, Loss: 5 - float64(s)}
		if s == 0 || s == 4 {
			r.ValLoss = &val
		}
		p.record(r)
		last := ""
		for _, f := range strings.Split(buf.String(), "\r") {
			if strings.Contains(f, "%") {
				last = f
			}
		}
		want := []string{fmt.Sprintf("%d%%", 25*s), fmt.Sprintf("(%d/4)", s)}
		if s > 0 {
			want = append(want, fmt.Sprintf("loss %.3f", r.Loss))
		}
		for _, w := range want {
			if !strings.Contains(last, w) {
				t.Errorf("update %d: the last frame %q lacks %q", s, last, w)
			}
		}
		if r.ValLoss != nil && !strings.Contains(buf.String(), fmt.Sprintf("update %d/4  val loss 3.0000", s)) {
			t.Errorf("update %d: no validation line in %q", s, buf.String())
		}
	}
	buf.Reset()
	p.finish()
	if out := buf.String(); strings.TrimSpace(out) != "" || !strings.HasSuffix(out, "\r") {
		t.Errorf("finish wrote %q, want the line cleared", out)
	}
}
