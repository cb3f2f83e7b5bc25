package view

import (
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/internal/browsertest"
)

var screenshot = flag.Bool("screenshot", false, "TestBrowserScreenshot writes docs/images/view-compare.png")

// The page on the runs of the main job's comparison of the two heads
// (testdata/runs, see its README), which go test -run
// TestBrowserScreenshot -screenshot photographs into
// docs/images/view-compare.png.
func TestBrowserScreenshot(t *testing.T) {
	runs := filepath.Join("testdata", "runs")
	s := newServer(t, runs)
	l, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	want := map[string]int{}
	for _, r := range l.Runs {
		names = append(names, r.Name)
		recs, _, warn := s.records(r.Name)
		if len(warn) > 0 || len(recs) == 0 {
			t.Fatalf("%s: %d records, %v", r.Name, len(recs), warn)
		}
		want = merge(want, seriesPoints(r.Name, r.Head, r.Settings != nil, recs))
	}
	sort.Strings(names)
	if len(names) != 2 {
		t.Fatalf("testdata runs %q, want the two heads", names)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	p := browsertest.Open(t, ts.URL+"/?poll=100&smooth=0.6&tick="+strings.Join(names, ","), 1400, 1000)
	p.Wait(fmt.Sprintf(`document.querySelectorAll('path.series').length === %d`, len(want)))
	if got := drawn(p); !reflect.DeepEqual(got, want) {
		t.Errorf("drawn series %v,\nwant %v", got, want)
	}
	p.Wait(`document.querySelectorAll('#differ-table tr[data-setting="head"]').length === 1`)
	// A hover, to show the values it gives.
	browsertest.Eval[bool](p, `(() => {
		const svg = document.querySelector('svg[data-chart="diameter"]'), r = svg.getBoundingClientRect();
		svg.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + r.width * 0.55, clientY: r.top + r.height * 0.4, bubbles: true}));
		return !document.getElementById('tooltip').hidden;
	})()`)
	p.CheckConsole()
	if !*screenshot {
		return
	}
	png := p.Screenshot()
	out := filepath.Join("..", "docs", "images", "view-compare.png")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", out, len(png))
}
