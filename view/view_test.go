package view

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hilbert-ml/hilbert/train"
)

func f64(v float64) *float64 { return &v }

// records returns n updates' records as train logs them: update 0's
// validation, then every update, with validation every valEvery and
// D(S_t) and the head's learning rate every diagEvery.
func fixtureRecords(n, valEvery, diagEvery int, base float64) []train.Record {
	recs := []train.Record{{Step: 0, ElapsedS: 0.5, ValLoss: f64(base + 0.3)}}
	for s := 1; s <= n; s++ {
		lr := 1 - 0.9*float64(s-1)/float64(max(n-1, 1))
		r := train.Record{Step: s, Loss: base + 1/float64(s), LRScale: lr, GradNorm: 0.7 + 0.01*float64(s),
			Tokens: int64(512 * s), TokensPerS: 800 + float64(s), ElapsedS: float64(s)}
		if s%valEvery == 0 || s == n {
			r.ValLoss = f64(base + 0.1 + 1/float64(s))
			r.HilbertRMS = f64(0.01 * lr)
		}
		if s%diagEvery == 0 {
			r.Diameter, r.LR = f64(0.015*lr), f64(0.01*lr)
		}
		recs = append(recs, r)
	}
	return recs
}

func jsonLines(t *testing.T, recs []train.Record) []byte {
	t.Helper()
	var b []byte
	for _, r := range recs {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, line...), '\n')
	}
	return b
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fixtureRun writes a run folder: metrics, and (ckStep > 0) a checkpoint
// of update ckStep of a run of steps updates with these settings.
func fixtureRun(t *testing.T, dir string, recs []train.Record, ckStep, steps int, settings map[string]string) {
	t.Helper()
	write(t, filepath.Join(dir, "metrics.jsonl"), jsonLines(t, recs))
	write(t, filepath.Join(dir, train.LockFile), nil)
	if ckStep > 0 {
		ck := fmt.Sprintf("step-%07d", ckStep)
		write(t, filepath.Join(dir, "checkpoints", "latest.json"), fmt.Appendf(nil, `{"dir":%q,"step":%d}`, ck, ckStep))
		st, _ := json.Marshal(map[string]any{"version": 2, "step": ckStep, "steps": steps, "settings": settings, "head": settings["head"]})
		write(t, filepath.Join(dir, "checkpoints", ck, "state.json"), st)
	}
}

func settings(head, seed string) map[string]string {
	return map[string]string{"head": head, "seed": seed, "dim": "64", "layers": "1", "vocab": "50257", "context": "64",
		"muon_lr": "0.02", "embed_lr": "0.02", "head_lr": "0.01", "batch_seqs": "8"}
}

// tinyPNG is a 2x2 PNG.
func tinyPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{200, 30, 30, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

const secret = "SECRET-OUTSIDE-THE-RUNS-FOLDER"

// fixture builds a runs folder and, beside it, a folder outside it that
// symbolic links inside point at. It returns the runs folder.
func fixture(t *testing.T) string {
	t.Helper()
	top := t.TempDir()
	runs, outside := filepath.Join(top, "runs"), filepath.Join(top, "outside")
	// Outside: a run of its own and a PNG.
	fixtureRun(t, filepath.Join(outside, "run"), fixtureRecords(4, 2, 2, 3), 4, 4, settings("adamw", "9"))
	write(t, filepath.Join(outside, "secret.png"), []byte(secret))
	write(t, filepath.Join(outside, "metrics.jsonl"), []byte(`{"step":1,"loss":"`+secret+`"}`+"\n"))

	// a: finished (checkpoint of its last update), with a summary.
	fixtureRun(t, filepath.Join(runs, "a"), fixtureRecords(8, 4, 2, 2), 8, 8, settings("rownorm", "0"))
	write(t, filepath.Join(runs, "a", "summary.md"), []byte("# Run a\n\n| setting | value |\n|---|---|\n| model | d 64, 1 layers <tiny> |\n\n![loss](loss.png)\n"))
	write(t, filepath.Join(runs, "a", "loss.png"), tinyPNG(t))
	// b: running (the lock names this process).
	fixtureRun(t, filepath.Join(runs, "b"), fixtureRecords(3, 4, 2, 2.5), 0, 0, nil)
	host, _ := os.Hostname()
	holder, _ := json.Marshal(train.LockHolder{PID: os.Getpid(), Host: host, Command: "hilbert train -name b"})
	write(t, filepath.Join(runs, "b", train.LockFile), holder)
	// c: interrupted by a signal (free lock, checkpoint short of steps).
	fixtureRun(t, filepath.Join(runs, "c"), fixtureRecords(5, 4, 2, 2), 5, 20, settings("adamw", "1"))
	// d: killed (the lock names a process that does not exist).
	fixtureRun(t, filepath.Join(runs, "d"), fixtureRecords(2, 4, 2, 2), 0, 0, nil)
	dead, _ := json.Marshal(train.LockHolder{PID: 1<<31 - 2, Host: host})
	write(t, filepath.Join(runs, "d", train.LockFile), dead)
	// A comparison of two runs.
	fixtureRun(t, filepath.Join(runs, "cmp", "adamw-seed0"), fixtureRecords(6, 3, 3, 2), 6, 6, settings("adamw", "0"))
	fixtureRun(t, filepath.Join(runs, "cmp", "rownorm-seed0"), fixtureRecords(6, 3, 3, 2.1), 6, 6, settings("rownorm", "0"))
	write(t, filepath.Join(runs, "cmp", "compare_val_loss.png"), tinyPNG(t))
	write(t, filepath.Join(runs, "cmp", "compare.md"), []byte("# Head-geometry comparison\n\n| head | val loss |\n|---|---|\n| adamw | 2.4 |\n\n![validation loss](compare_val_loss.png)\n"))

	// Symbolic links that lead out of the runs folder.
	for link, target := range map[string]string{
		filepath.Join(runs, "evil"):                    filepath.Join(outside, "run"),
		filepath.Join(runs, "a", "leak.png"):           filepath.Join(outside, "secret.png"),
		filepath.Join(runs, "sneaky", "metrics.jsonl"): filepath.Join(outside, "metrics.jsonl"),
		filepath.Join(runs, "a", "up"):                 outside,
	} {
		os.MkdirAll(filepath.Dir(link), 0o755)
		if err := os.Symlink(target, link); err != nil {
			t.Skipf("no symbolic links here: %v", err)
		}
	}
	return runs
}

func newServer(t *testing.T, dir string) *Server {
	t.Helper()
	s, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// get serves target (a request line's raw target) and returns the code
// and body.
func get(t *testing.T, h http.Handler, target string) (int, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
	return rec.Code, rec.Body.Bytes()
}

func getJSON[T any](t *testing.T, h http.Handler, target string) T {
	t.Helper()
	code, body := get(t, h, target)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", target, code, body)
	}
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("GET %s: %v in %s", target, err, body)
	}
	return v
}

func TestListing(t *testing.T) {
	s := newServer(t, fixture(t))
	l := getJSON[Listing](t, s, "/api/runs")
	var names []string
	byName := map[string]Run{}
	for _, r := range l.Runs {
		names = append(names, r.Name)
		byName[r.Name] = r
	}
	// evil and sneaky are links out of the folder: not runs.
	if got, want := strings.Join(names, " "), "a b c cmp/adamw-seed0 cmp/rownorm-seed0 d"; got != want {
		t.Fatalf("runs %q, want %q", got, want)
	}
	for _, c := range []struct {
		name, status, head, seed, model string
		updates, steps                  int
		loss, val                       float64
	}{
		{"a", StatusFinished, "rownorm", "0", "d 64, 1 layers <tiny>", 8, 8, 2 + 1.0/8, 2.1 + 1.0/8},
		{"b", StatusRunning, "", "", "", 3, 0, 2.5 + 1.0/3, 2.6 + 1.0/3},
		{"c", StatusInterrupted, "adamw", "1", "d 64, 1 layers, vocabulary 50257, context 64", 5, 20, 2.2, 2.1 + 1.0/5},
		{"d", StatusInterrupted, "", "", "", 2, 0, 2.5, 2.1 + 1.0/2},
	} {
		r := byName[c.name]
		if r.Status != c.status || r.Head != c.head || r.Seed != c.seed || r.Model != c.model || r.Updates != c.updates || r.Steps != c.steps {
			t.Errorf("%s: status %q head %q seed %q model %q updates %d of %d, want %q %q %q %q %d of %d",
				c.name, r.Status, r.Head, r.Seed, r.Model, r.Updates, r.Steps, c.status, c.head, c.seed, c.model, c.updates, c.steps)
		}
		if r.Loss == nil || math.Abs(*r.Loss-c.loss) > 1e-12 || r.ValLoss == nil || math.Abs(*r.ValLoss-c.val) > 1e-12 {
			t.Errorf("%s: losses %v %v, want %v %v", c.name, r.Loss, r.ValLoss, c.loss, c.val)
		}
	}
	if r := byName["b"]; r.Command != "hilbert train -name b" || !strings.Contains(r.StatusDetail, fmt.Sprint(os.Getpid())) {
		t.Errorf("running run b: command %q, detail %q", r.Command, r.StatusDetail)
	}
	if r := byName["d"]; !strings.Contains(r.StatusDetail, "without releasing") {
		t.Errorf("killed run d: detail %q, want the stale lock explained", r.StatusDetail)
	}
	if r := byName["a"]; !r.HasSummary || r.Settings["head_lr"] != "0.01" || r.TokensPerS != 804.5 {
		t.Errorf("a: summary %v, settings %v, tokens/s %v (want 804.5, the mean of 801..808)", r.HasSummary, r.Settings, r.TokensPerS)
	}
	if len(l.Comparisons) != 1 || l.Comparisons[0].Name != "cmp" || strings.Join(l.Comparisons[0].Runs, " ") != "cmp/adamw-seed0 cmp/rownorm-seed0" {
		t.Errorf("comparisons %+v, want cmp with its two runs", l.Comparisons)
	}
}

// isRun, which the API asks, agrees with the listing's walk.
func TestIsRunAgreesWithTheListing(t *testing.T) {
	runs := fixture(t)
	// Deeper than the walk goes, and inside a folder it skips.
	fixtureRun(t, filepath.Join(runs, "x", "y", "z", "w", "deep"), fixtureRecords(2, 2, 2, 2), 0, 0, nil)
	fixtureRun(t, filepath.Join(runs, "a", "checkpoints", "inner"), fixtureRecords(2, 2, 2, 2), 0, 0, nil)
	fixtureRun(t, filepath.Join(runs, ".hidden"), fixtureRecords(2, 2, 2, 2), 0, 0, nil)
	fixtureRun(t, filepath.Join(runs, "x", "y", "z", "four"), fixtureRecords(2, 2, 2, 2), 0, 0, nil)
	s := newServer(t, runs)
	listed, _, err := s.discover()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(listed, "x/y/z/four") || slices.Contains(listed, "x/y/z/w/deep") {
		t.Errorf("listed %q: want x/y/z/four (4 deep) but not x/y/z/w/deep", listed)
	}
	for _, n := range listed {
		if !s.isRun(n) {
			t.Errorf("isRun(%q) = false for a listed run", n)
		}
	}
	for _, n := range []string{"evil", "sneaky", "a/up/run", "x/y/z/w/deep", "a/checkpoints/inner", ".hidden", "cmp", "nosuch", "a/", "../outside/run", ""} {
		if s.isRun(n) {
			t.Errorf("isRun(%q) = true for a folder the listing does not show", n)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	runs := fixture(t)
	for _, c := range []struct{ dir, want string }{
		{filepath.Join(runs, "missing"), "no such file"},
		{filepath.Join(runs, "a", "summary.md"), "not a folder"},
		{filepath.Join(runs, "a"), "is a run's folder"},
	} {
		s, err := New(c.dir)
		if err == nil {
			s.Close()
			t.Errorf("New(%s): no error", c.dir)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%s): %v, want %q", c.dir, err, c.want)
		}
	}
}

func TestMetricsOffsets(t *testing.T) {
	runs := fixture(t)
	s := newServer(t, runs)
	path := filepath.Join(runs, "b", "metrics.jsonl")
	data, _ := os.ReadFile(path)
	m := getJSON[Metrics](t, s, "/api/runs/b/metrics")
	if len(m.Records) != 4 || m.Offset != int64(len(data)) || m.Reset || m.More {
		t.Fatalf("from 0: %d records, offset %d (file %d bytes), reset %v, more %v; want 4 records to the end", len(m.Records), m.Offset, len(data), m.Reset, m.More)
	}
	var last struct{ Step int }
	json.Unmarshal(m.Records[3], &last)
	if last.Step != 3 {
		t.Fatalf("last record of step %d, want 3", last.Step)
	}
	at := fmt.Sprintf("/api/runs/b/metrics?from=%d&step=3", m.Offset)
	if m := getJSON[Metrics](t, s, at); len(m.Records) != 0 || m.Offset != int64(len(data)) || m.Reset {
		t.Fatalf("at the end: %+v, want nothing new", m)
	}

	// A line being written is left for the next request, then served.
	rec4 := jsonLines(t, fixtureRecords(4, 4, 2, 2.5)[4:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write(rec4[:10])
	if m := getJSON[Metrics](t, s, at); len(m.Records) != 0 || m.Offset != int64(len(data)) {
		t.Fatalf("half a line appended: %d records, offset %d; want none, offset %d", len(m.Records), m.Offset, len(data))
	}
	f.Write(rec4[10:])
	m = getJSON[Metrics](t, s, at)
	json.Unmarshal(m.Records[0], &last)
	if len(m.Records) != 1 || last.Step != 4 || m.Offset != int64(len(data)+len(rec4)) {
		t.Fatalf("after the append: %d records (step %d), offset %d; want the record of update 4, offset %d", len(m.Records), last.Step, m.Offset, len(data)+len(rec4))
	}
	if l := getJSON[Listing](t, s, "/api/runs"); l.Runs[1].Name != "b" || l.Runs[1].Updates != 4 {
		t.Errorf("listing after the append: %s at update %d, want b at 4", l.Runs[1].Name, l.Runs[1].Updates)
	}

	// A file that no longer continues what was read starts over.
	for _, c := range []struct{ name, query string }{
		{"past the end", fmt.Sprintf("from=%d", len(data)+len(rec4)+1)},
		{"mid-line", "from=5"},
		{"another update before the offset", fmt.Sprintf("from=%d&step=2", len(data))},
	} {
		m := getJSON[Metrics](t, s, "/api/runs/b/metrics?"+c.query)
		if !m.Reset || len(m.Records) != 5 {
			t.Errorf("%s (%s): reset %v, %d records; want a reset with all 5", c.name, c.query, m.Reset, len(m.Records))
		}
	}
	for _, q := range []string{"from=-1", "from=x", "step=-2"} {
		if code, body := get(t, s, "/api/runs/b/metrics?"+q); code != http.StatusBadRequest || !strings.Contains(string(body), "want") {
			t.Errorf("?%s: %d %s, want 400 saying what is wanted", q, code, body)
		}
	}
}

// A resumed run rewrites metrics.jsonl without the records past its
// checkpoint, then appends: a client at the old offset starts over,
// whether the new file is shorter or longer than what it read.
func TestMetricsRewrittenByResume(t *testing.T) {
	runs := fixture(t)
	s := newServer(t, runs)
	path := filepath.Join(runs, "c", "metrics.jsonl")
	recs := fixtureRecords(8, 4, 2, 2)
	// Updates 4-8 logged again after a resume from update 3: other times.
	resumed := append([]train.Record(nil), recs...)
	for i := 4; i < len(resumed); i++ {
		resumed[i].ElapsedS += 100.25
	}
	for _, c := range []struct {
		name  string
		recs  []train.Record
		reset bool
		n     int
	}{
		{"appended", recs[:7], false, 1},                        // updates 0-6: update 6 is new
		{"resumed from update 3, shorter", recs[:4], true, 4},   // 0-3
		{"resumed from update 3, longer", resumed[:9], true, 9}, // 0-8, logged again from 4
	} {
		write(t, path, jsonLines(t, recs[:6])) // what the client read: 0-5
		m := getJSON[Metrics](t, s, "/api/runs/c/metrics")
		write(t, path, jsonLines(t, c.recs))
		next := getJSON[Metrics](t, s, fmt.Sprintf("/api/runs/c/metrics?from=%d&step=5", m.Offset))
		if next.Reset != c.reset || len(next.Records) != c.n {
			t.Errorf("%s: reset %v, %d records; want reset %v, %d records", c.name, next.Reset, len(next.Records), c.reset, c.n)
		}
	}
}

func TestDocuments(t *testing.T) {
	s := newServer(t, fixture(t))
	d := getJSON[Document](t, s, "/api/runs/a/summary")
	for _, want := range []string{"<h1>Run a</h1>", "<td>d 64, 1 layers &lt;tiny&gt;</td>", `<img src="/files/a/loss.png" alt="loss">`} {
		if !strings.Contains(d.HTML, want) {
			t.Errorf("summary HTML lacks %q:\n%s", want, d.HTML)
		}
	}
	if code, body := get(t, s, "/files/a/loss.png"); code != 200 || !bytes.Equal(body, tinyPNG(t)) {
		t.Errorf("the summary's image: %d %q", code, body)
	}
	d = getJSON[Document](t, s, "/api/compare/cmp")
	if d.Path != "cmp/compare.md" || !strings.Contains(d.HTML, `<img src="/files/cmp/compare_val_loss.png"`) || !strings.Contains(d.HTML, "<th>head</th>") {
		t.Errorf("compare.md: %s\n%s", d.Path, d.HTML)
	}
	if code, _ := get(t, s, "/api/runs/b/summary"); code != http.StatusNotFound {
		t.Errorf("summary of a run without one: %d, want 404", code)
	}
	if code, _ := get(t, s, "/api/compare/"); code != http.StatusNotFound {
		t.Errorf("compare.md of the runs folder, which has none: %d, want 404", code)
	}
	// Served from the comparison's own folder, the report is the root's.
	cs := newServer(t, filepath.Join(s.Dir(), "cmp"))
	if l := getJSON[Listing](t, cs, "/api/runs"); len(l.Comparisons) != 1 || l.Comparisons[0].Name != "" || len(l.Comparisons[0].Runs) != 2 {
		t.Errorf("comparisons of the comparison's folder: %+v, want its own (name \"\") with 2 runs", l.Comparisons)
	}
	if d := getJSON[Document](t, cs, "/api/compare/"); d.Path != "compare.md" || !strings.Contains(d.HTML, `<img src="/files/compare_val_loss.png"`) {
		t.Errorf("the root's compare.md: %s\n%s", d.Path, d.HTML)
	}
	code, body := get(t, s, "/")
	if code != 200 || !strings.Contains(string(body), `<script src="/assets/app.js">`) {
		t.Errorf("the page: %d %.80s", code, body)
	}
	for _, a := range []string{"/assets/app.js", "/assets/style.css"} {
		if code, body := get(t, s, a); code != 200 || len(body) < 1000 {
			t.Errorf("%s: %d, %d bytes", a, code, len(body))
		}
	}
}

// Nothing outside the runs folder is served: not through "..", encoded or
// not, an absolute path, a backslash, or a symbolic link out of it.
func TestTraversal(t *testing.T) {
	s := newServer(t, fixture(t))
	for _, c := range []struct {
		target string
		code   int
	}{
		{"/api/runs/../outside/run/metrics", 400},
		{"/api/runs/%2e%2e/outside/run/metrics", 400},
		{"/api/runs/%2E%2E%2Foutside%2Frun/metrics", 400},
		{"/api/runs/a/%2e%2e/%2e%2e/outside/run/metrics", 400},
		{"/api/runs/./a/metrics", 400},
		{"/api/runs//tmp/metrics", 400},
		{"/api/runs/%2ftmp/metrics", 400},
		{"/api/runs/..%5c..%5coutside/metrics", 400},
		{"/api/runs/a%00/metrics", 400},
		{"/api/runs/evil/metrics", 404},
		{"/api/runs/evil/summary", 404},
		{"/api/runs/sneaky/metrics", 404},
		{"/api/runs/a/up/run/metrics", 404},
		{"/api/runs/nosuch/metrics", 404},
		{"/api/runs/a/passwd", 404},
		{"/api/compare/..", 400},
		{"/api/compare/%2e%2e%2foutside", 400},
		{"/api/compare/a/up", 404},
		{"/files/../outside/secret.png", 400},
		{"/files/%2e%2e/outside/secret.png", 400},
		{"/files//tmp/secret.png", 400},
		{"/files/a/leak.png", 404},
		{"/files/a/up/secret.png", 404},
		{"/files/evil/secret.png", 404},
		{"/files/a/summary.md", 404},
		{"/files/a/metrics.jsonl", 404},
	} {
		code, body := get(t, s, c.target)
		if code != c.code {
			t.Errorf("GET %s: %d %s, want %d", c.target, code, body, c.code)
		}
		if strings.Contains(string(body), secret) || strings.Contains(string(body), `"step":`) {
			t.Errorf("GET %s served data: %s", c.target, body)
		}
	}
}

// The same through a real server, with the request line sent as written
// (an HTTP client would clean it).
func TestTraversalOverTCP(t *testing.T) {
	ts := httptest.NewServer(newServer(t, fixture(t)))
	defer ts.Close()
	for _, target := range []string{
		"/api/runs/../outside/run/metrics",
		"/api/runs/%2e%2e/outside/run/metrics",
		"/files/..%2foutside%2fsecret.png",
		"/files/a/leak.png",
		"/api/runs/evil/metrics",
	} {
		conn, err := net.DialTimeout("tcp", ts.Listener.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", target)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != 400 && resp.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 400 or 404", target, resp.StatusCode)
		}
		if strings.Contains(string(body), secret) || strings.Contains(string(body), `"step":`) {
			t.Errorf("GET %s served data: %s", target, body)
		}
	}
}
