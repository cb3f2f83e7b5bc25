package browsertest

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A page's console errors, uncaught exceptions and failed loads are seen;
// its log lines are not errors.
func TestConsoleErrorsAreSeen(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `<!DOCTYPE html><link rel="icon" href="data:,"><body><p id="p">hello</p><script>
			console.log('fine');
			console.error('broken', 42);
			fetch('/missing.json');
			setTimeout(() => { document.body.dataset.done = '1'; throw new Error('uncaught'); }, 0);
		</script>`)
	}))
	defer ts.Close()
	p := Open(t, ts.URL, 800, 600)
	p.Wait(`document.body.dataset.done === '1'`)
	if got := Eval[string](p, `document.getElementById('p').textContent`); got != "hello" {
		t.Errorf("text %q", got)
	}
	p.Wait(`true`)
	var errs []string
	for range 100 { // the three arrive asynchronously
		if errs = p.Errors(); len(errs) >= 3 {
			break
		}
		p.Wait(`new Promise((ok) => setTimeout(() => ok(true), 20))`)
	}
	all := strings.Join(errs, "\n")
	for _, want := range []string{"broken 42", "uncaught", "404"} {
		if !strings.Contains(all, want) {
			t.Errorf("console errors lack %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "fine") {
		t.Errorf("console.log counted as an error:\n%s", all)
	}
	if png := p.Screenshot(); !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("screenshot is not a PNG: % x", png[:min(8, len(png))])
	}
}
