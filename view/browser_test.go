package view

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/internal/browsertest"
	"github.com/hilbert-ml/hilbert/train"
)

// The browser tests load the page from an httptest server over a fixture
// (or, for the screenshot, the committed runs in testdata) in headless
// Chromium, polling every 100 ms so that they take a second or two.

// seriesPoints is what the page must draw for one run: the number of
// points of each series, by "chart/run/series" (see app.js's charts):
// the training loss, gradient norm, throughput and learning rates at every
// update (the rates of the three groups once the settings give their
// peaks), the validation loss wherever logged (update 0 included), D(S_t)
// and the Hilbert RMS where logged and positive, and for a RowNorm run
// the bound 2·lr_t wherever D(S_t) and the head's rate are.
func seriesPoints(name, head string, withPeaks bool, recs []train.Record) map[string]int {
	n := map[string]int{}
	for _, r := range recs {
		if r.Step > 0 {
			n["loss/"+name+"/train"]++
			n["grad_norm/"+name+"/grad_norm"]++
			n["throughput/"+name+"/tokens_per_s"]++
			if withPeaks {
				n["lr/"+name+"/muon_lr"]++
				n["lr/"+name+"/embed_lr"]++
				n["lr/"+name+"/head_lr"]++
			} else {
				n["lr/"+name+"/lr_scale"]++
			}
		}
		if r.ValLoss != nil {
			n["loss/"+name+"/val"]++
		}
		if r.Diameter != nil && *r.Diameter > 0 {
			n["diameter/"+name+"/diameter"]++
			if head == "rownorm" && r.LR != nil && *r.LR > 0 {
				n["diameter/"+name+"/bound"]++
			}
		}
		if r.HilbertRMS != nil && *r.HilbertRMS > 0 {
			n["hilbert_rms/"+name+"/hilbert_rms"]++
		}
	}
	return n
}

// drawn returns the page's series point counts, as seriesPoints keys them:
// the points of each path's outline (its M and L commands), which must be
// what its data-points attribute says.
func drawn(p *browsertest.Page) map[string]int {
	type series struct {
		Key             string
		Points, Outline int
	}
	all := browsertest.Eval[[]series](p, `[...document.querySelectorAll('path.series')].map((e) => ({
		key: e.closest('svg').dataset.chart + '/' + e.dataset.run + '/' + e.dataset.series,
		points: Number(e.dataset.points), outline: (e.getAttribute('d').match(/[ML]/g) || []).length}))`)
	n := map[string]int{}
	for _, s := range all {
		if s.Points != s.Outline {
			p.T().Errorf("%s: data-points %d, but its path has %d points", s.Key, s.Points, s.Outline)
		}
		n[s.Key] = s.Outline
	}
	return n
}

func merge(ms ...map[string]int) map[string]int {
	out := map[string]int{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestBrowserDrawsTickedRuns(t *testing.T) {
	runs := fixture(t)
	ts := httptest.NewServer(newServer(t, runs))
	defer ts.Close()
	p := browsertest.Open(t, ts.URL+"/?tick=a,c&poll=100", 1280, 900)
	p.Wait(`document.body.dataset.ready && document.querySelectorAll('path.series[data-run="c"]').length > 0`)

	rows := browsertest.Eval[[]string](p, `[...document.querySelectorAll('#runs tbody tr')].map((r) => r.dataset.run + ' ' + r.dataset.status)`)
	want := []string{"a finished", "b running", "c interrupted", "cmp/adamw-seed0 finished", "cmp/rownorm-seed0 finished", "d interrupted"}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("runs table %q, want %q", rows, want)
	}
	wantPoints := merge(seriesPoints("a", "rownorm", true, fixtureRecords(8, 4, 2, 2)), seriesPoints("c", "adamw", true, fixtureRecords(5, 4, 2, 2)))
	if got := drawn(p); !reflect.DeepEqual(got, wantPoints) {
		t.Errorf("drawn series %v,\nwant %v", got, wantPoints)
	}
	// a is RowNorm at seed 0, c AdamW at seed 1: their other settings agree.
	differ := browsertest.Eval[[]string](p, `[...document.querySelectorAll('#differ-table tr[data-setting]')].map((r) => r.dataset.setting + ': ' + [...r.cells].slice(1).map((c) => c.textContent).join(' / '))`)
	if want := []string{"head: rownorm / adamw", "seed: 0 / 1"}; !reflect.DeepEqual(differ, want) {
		t.Errorf("settings that differ %q, want %q", differ, want)
	}

	// The x axis by tokens: the same points, the axis named.
	browsertest.Eval[bool](p, `(() => { const s = document.getElementById('xaxis'); s.value = 'tokens'; s.dispatchEvent(new Event('change')); return true; })()`)
	p.Wait(`[...document.querySelectorAll('svg[data-chart="loss"] text')].some((e) => e.textContent === 'tokens')`)
	if got := drawn(p); !reflect.DeepEqual(got, wantPoints) {
		t.Errorf("by tokens: drawn series %v, want %v", got, wantPoints)
	}
	// Log axes, and smoothing (which draws the raw lines faded behind).
	browsertest.Eval[bool](p, `(() => { const c = document.querySelector('input.log[data-chart="loss"]'); c.click(); return c.checked; })()`)
	browsertest.Eval[bool](p, `(() => { const s = document.getElementById('smoothing'); s.value = '0.9'; s.dispatchEvent(new Event('input')); return true; })()`)
	p.Wait(`document.querySelectorAll('svg[data-chart="loss"] path.raw').length === 2`) // a's and c's training loss
	if got := drawn(p); !reflect.DeepEqual(got, wantPoints) {
		t.Errorf("log, smoothed: drawn series %v, want %v", got, wantPoints)
	}
	// Hover: the tooltip gives each ticked run's values.
	tip := browsertest.Eval[string](p, `(() => {
		const svg = document.querySelector('svg[data-chart="loss"]'), r = svg.getBoundingClientRect();
		svg.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + r.width * 0.95, clientY: r.top + r.height / 2, bubbles: true}));
		const t = document.getElementById('tooltip');
		return t.hidden ? '' : t.textContent;
	})()`)
	for _, want := range []string{"tokens 4096", "a · train: ", "c · train: ", "a · validation: "} {
		if !strings.Contains(tip, want) {
			t.Errorf("tooltip %q lacks %q", tip, want)
		}
	}

	// A run's summary (with its plot) and settings.
	p.Click(`#runs tr[data-run="a"] td.name a`)
	p.Wait(`document.querySelector('#detail .summary h1')?.textContent === 'Run a' && document.querySelector('#detail img')?.naturalWidth === 2`)
	if n := browsertest.Eval[int](p, `document.querySelectorAll('#detail table.settings tr').length`); n != len(settings("rownorm", "0")) {
		t.Errorf("%d settings shown, want %d", n, len(settings("rownorm", "0")))
	}
	// The comparison: its report, and a button that ticks its runs.
	p.Click(`.comparison[data-comparison="cmp"] button.open-report`)
	p.Wait(`document.querySelector('#detail .report h1')?.textContent === 'Head-geometry comparison' && document.querySelector('#detail img')?.naturalWidth === 2`)
	p.Click(`.comparison[data-comparison="cmp"] button.tick-runs`)
	p.Wait(`document.querySelectorAll('path.series[data-run="cmp/rownorm-seed0"]').length > 0`)
	if got := browsertest.Eval[string](p, `new URLSearchParams(location.search).get('tick')`); got != "a,c,cmp/adamw-seed0,cmp/rownorm-seed0" {
		t.Errorf("the URL ticks %q", got)
	}
	p.CheckConsole()
}

// The page follows a running run: records appended to its metrics.jsonl
// (a line at a time, the last one in two writes) are drawn without a
// reload, and a rewrite by a resume starts the curves over.
func TestBrowserFollowsAppends(t *testing.T) {
	runs := fixture(t)
	ts := httptest.NewServer(newServer(t, runs))
	defer ts.Close()
	p := browsertest.Open(t, ts.URL+"/?tick=b&poll=100", 1024, 800)
	train := `Number(document.querySelector('path.series[data-run="b"][data-series="train"]')?.dataset.points)`
	p.Wait(train + ` === 3`)

	path := filepath.Join(runs, "b", "metrics.jsonl")
	more := fixtureRecords(5, 4, 2, 2.5)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write(jsonLines(t, more[4:5]))
	p.Wait(train + ` === 4`)
	last := jsonLines(t, more[5:])
	f.Write(last[:20])
	f.Write(last[20:])
	p.Wait(train + ` === 5 && document.body.dataset.records === '6'`)
	if got, want := drawn(p), seriesPoints("b", "", false, append(fixtureRecords(3, 4, 2, 2.5), more[4:]...)); !reflect.DeepEqual(got, want) {
		t.Errorf("after the appends: drawn %v, want %v", got, want)
	}

	// Resumed from update 2: the file holds updates 0-2 again.
	write(t, path, jsonLines(t, fixtureRecords(3, 4, 2, 2.5)[:3]))
	p.Wait(train + ` === 2 && document.body.dataset.records === '3'`)
	p.CheckConsole()
}
