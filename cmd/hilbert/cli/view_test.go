package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hilbert-ml/hilbert/internal/browsertest"
	"github.com/hilbert-ml/hilbert/view"
)

// hilbert view serves the dashboard of a run that train wrote, and stops
// when its context ends.
func TestViewServesARun(t *testing.T) {
	run := tinyTextRun(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	orig := viewContext
	viewContext = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	defer func() { viewContext = orig }()

	out, w := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- Run([]string{"view", "-runs", filepath.Dir(run), "-addr", "127.0.0.1:0"}, w, &stderr)
		w.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("no URL printed: %v; stderr: %s", err, stderr.String())
	}
	go io.Copy(io.Discard, out)
	url := regexp.MustCompile(`http://127\.0\.0\.1:\d+/`).FindString(line)
	if url == "" {
		t.Fatalf("printed %q, want the URL on 127.0.0.1", line)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	getJSON := func(path string, v any) {
		t.Helper()
		resp, err := client.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("GET %s: %s %s", path, resp.Status, b)
		}
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var l view.Listing
	getJSON("api/runs", &l)
	if len(l.Runs) != 1 {
		t.Fatalf("listing %+v, want the one run", l)
	}
	r := l.Runs[0]
	if r.Name != "tiny" || r.Status != view.StatusFinished || r.Updates != 3 || r.Steps != 3 || r.Head != "rownorm" || r.Settings["dim"] != "64" ||
		r.Loss == nil || r.ValLoss == nil || r.Diameter == nil || r.HilbertRMS == nil || !r.HasSummary {
		t.Errorf("run %+v, want tiny, finished at update 3 of 3, rownorm, d 64, with its final values and a summary", r)
	}
	var m view.Metrics
	getJSON("api/runs/tiny/metrics", &m)
	if len(m.Records) != 4 { // update 0's validation, then 3 updates
		t.Errorf("%d records, want 4", len(m.Records))
	}
	var last map[string]any
	json.Unmarshal(m.Records[3], &last)
	for _, k := range []string{"step", "loss", "val_loss", "diameter", "head_lr", "hilbert_rms", "grad_norm", "lr_scale", "tokens", "tokens_per_s"} {
		if _, ok := last[k]; !ok {
			t.Errorf("the last record lacks %q, which the page draws: %v", k, last)
		}
	}
	var d view.Document
	getJSON("api/runs/tiny/summary", &d)
	if !strings.Contains(d.HTML, "<h1>Run tiny</h1>") || !strings.Contains(d.HTML, `src="/files/tiny/loss.png"`) {
		t.Errorf("summary HTML:\n%s", d.HTML)
	}
	resp, err := client.Get(url + "files/tiny/loss.png")
	if err != nil {
		t.Fatal(err)
	}
	png, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("loss.png: %s, %d bytes", resp.Status, len(png))
	}

	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("exit %d after the interrupt: %s", c, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("hilbert view did not stop")
	}
}

// The page follows a training run as it appends: the run is listed as
// running with some of its updates drawn, then as finished with all of
// them, without a reload.
func TestViewFollowsTraining(t *testing.T) {
	browsertest.Require(t) // before training
	dir := t.TempDir()
	text := filepath.Join(dir, "slice.txt")
	if err := os.WriteFile(text, opticksText(t)[:30_000], 0o644); err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(dir, "runs")
	os.MkdirAll(runs, 0o755)
	srv, err := view.New(runs)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	p := browsertest.Open(t, ts.URL+"/?tick=live&poll=100", 1024, 768)
	p.Wait(`document.body.dataset.ready === '1'`)

	const steps = 4
	args := []string{"train", "-name", "live", "-runs", runs, "-text", text, "-text-val-tokens", "500",
		"-layers", "1", "-dim", "64", "-context", "32", "-micro-batch", "2", "-batch-seqs", "4",
		"-steps", fmt.Sprint(steps), "-val-every", "2", "-val-tokens", "300", "-diag-every", "100",
		"-panel-seqs", "2", "-panel-positions", "8", "-quiet"}
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- Run(args, &stdout, &stderr) }()
	status := `document.querySelector('#runs tr[data-run="live"]')?.dataset.status`
	points := `Number(document.querySelector('path.series[data-run="live"][data-series="train"]')?.dataset.points)`
	p.Wait(fmt.Sprintf(`%s === 'running' && %s >= 1 && %s < %d`, status, points, points, steps))
	if code := <-done; code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr.String())
	}
	p.Wait(fmt.Sprintf(`%s === 'finished' && %s === %d`, status, points, steps))
	recs := metricsLines(t, filepath.Join(runs, "live", "metrics.jsonl"))
	val := 0
	for _, r := range recs {
		if _, ok := r["val_loss"]; ok {
			val++
		}
	}
	if got := browsertest.Eval[int](p, `Number(document.querySelector('path.series[data-run="live"][data-series="val"]').dataset.points)`); got != val || val != 3 {
		t.Errorf("%d validation points drawn, metrics.jsonl has %d (want 3: updates 0, 2, 4)", got, val)
	}
	p.CheckConsole()
}

func TestViewErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-runs", dir, "-addr", "0.0.0.0:0"}, 2, "not a loopback address"},
		{[]string{"-runs", dir, "-addr", ":6007"}, 2, "listens on every interface"},
		{[]string{"-runs", dir, "-addr", "192.168.1.5:80"}, 2, "pass -public"},
		{[]string{"-runs", dir, "-addr", "6007"}, 2, "want host:port"},
		{[]string{"-runs", dir, "-addr", "localhost:"}, 2, "no port"},
		{[]string{"-runs", dir, "extra"}, 2, "unexpected arguments"},
		{[]string{"-runs", filepath.Join(dir, "missing")}, 1, "no such file"},
		{[]string{"-runs", dir, "-addr", "127.0.0.1:99999"}, 1, "-addr 127.0.0.1:99999"},
	} {
		var stdout, stderr bytes.Buffer
		code := Run(append([]string{"view"}, c.args...), &stdout, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("view %q: exit %d, %q; want exit %d saying %q", c.args, code, stderr.String(), c.code, c.want)
		}
	}
}

// Without -public, only loopback host names reach the dashboard (a DNS
// rebinding page's Host is its own name).
func TestViewLoopbackHostOnly(t *testing.T) {
	h := loopbackHostOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	for _, c := range []struct {
		host string
		code int
	}{
		{"127.0.0.1:6007", 200}, {"localhost:6007", 200}, {"LOCALHOST", 200}, {"[::1]:6007", 200}, {"127.1.2.3", 200},
		{"evil.example:6007", 403}, {"192.168.1.5:6007", 403}, {"", 403}, {"localhost.evil.example", 403},
	} {
		r := httptest.NewRequest("GET", "/api/runs", nil)
		r.Host = c.host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.code {
			t.Errorf("Host %q: %d, want %d", c.host, w.Code, c.code)
		}
	}
}

func TestCheckViewAddr(t *testing.T) {
	for _, c := range []struct {
		addr   string
		public bool
		ok     bool
	}{
		{"127.0.0.1:6007", false, true},
		{"127.0.0.2:0", false, true},
		{"[::1]:6007", false, true},
		{"localhost:6007", false, true},
		{"0.0.0.0:6007", false, false},
		{"[::]:6007", false, false},
		{"example.com:80", false, false},
		{"0.0.0.0:6007", true, true},
		{":6007", true, true},
		{"nohost", true, false},
	} {
		if err := checkViewAddr(c.addr, c.public); (err == nil) != c.ok {
			t.Errorf("checkViewAddr(%q, public %v): %v, want ok %v", c.addr, c.public, err, c.ok)
		}
	}
}
