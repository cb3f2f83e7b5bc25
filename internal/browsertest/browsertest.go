// Package browsertest drives a headless Chromium from Go tests, through
// the DevTools protocol (chromedp): open a page, wait for a JavaScript
// condition, read values, click, take a screenshot, and check that the page
// wrote no error to its console. It is for tests only.
//
// The browser is $HILBERT_CHROMIUM, else the first of chromium,
// chromium-browser, google-chrome and headless-shell on $PATH; without one
// the test is skipped, saying so (Debian: apt-get install chromium).
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// WaitTimeout bounds Page.Wait.
const WaitTimeout = 15 * time.Second

// Browser returns the Chromium binary the tests use, or why there is none.
func Browser() (string, error) {
	if p := os.Getenv("HILBERT_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("HILBERT_CHROMIUM=%s: %w", p, err)
		}
		return p, nil
	}
	names := []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("none of %s on $PATH and HILBERT_CHROMIUM unset (Debian: apt-get install chromium)", strings.Join(names, ", "))
}

// Require returns the browser's binary. It skips the test, saying why,
// when none is found, and fails it when HILBERT_CHROMIUM names one that
// is not there (a setting to fix, not a machine without a browser).
func Require(t testing.TB) string {
	t.Helper()
	bin, err := Browser()
	switch {
	case err == nil:
		return bin
	case os.Getenv("HILBERT_CHROMIUM") != "":
		t.Fatalf("browser test: %v", err)
	default:
		t.Skipf("no browser for this test: %v", err)
	}
	return ""
}

// Page is one browser tab.
type Page struct {
	t   testing.TB
	ctx context.Context

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

// Open starts a headless browser with a window of width x height pixels
// and loads url in it. The test is skipped when no browser is found (see
// Require); the browser stops at the end of the test.
func Open(t testing.TB, url string, width, height int) *Page {
	t.Helper()
	bin := Require(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox, // tests often run as root, in a container
		chromedp.DisableGPU,
		chromedp.WindowSize(width, height),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	p := &Page{t: t, ctx: ctx}
	// Console starts the browser and opens the tab: its messages are
	// followed from before the page loads.
	messages := chromedp.Console(ctx)
	started := make(chan error, 1)
	go func() {
		first := true
		for m, err := range messages {
			if first {
				started <- err
				first = false
			}
			if err != nil {
				return
			}
			p.mu.Lock()
			p.console = append(p.console, m)
			p.mu.Unlock()
		}
	}()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		select {
		case serr := <-started:
			if serr != nil {
				t.Fatalf("starting %s: %v", bin, serr)
			}
		default:
		}
		t.Fatalf("loading %s in %s: %v", url, bin, err)
	}
	return p
}

// T returns the test the page belongs to.
func (p *Page) T() testing.TB { return p.t }

// Wait polls the JavaScript expression js until it is truthy, failing the
// test (with what the console holds) after WaitTimeout.
func (p *Page) Wait(js string) {
	p.t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	var err error
	for {
		_, err = chromedp.Run(p.ctx, chromedp.Poll[chromedp.Void](js,
			chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(time.Until(deadline))))
		// The page's JavaScript context is replaced while a document
		// loads: poll in the new one.
		if err == nil || !strings.Contains(err.Error(), "Cannot find context") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("waiting for %s: %v\nconsole:\n%s", js, err, p.consoleText())
	}
}

// Eval evaluates the JavaScript expression js on the page and decodes its
// value (returned by value, as JSON) into a T.
func Eval[T any](p *Page, js string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		p.t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// Click clicks the first element the CSS selector finds.
func (p *Page) Click(css string) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.Click(chromedp.CSS(css), chromedp.NodeVisible)); err != nil {
		p.t.Fatalf("clicking %s: %v", css, err)
	}
}

// Screenshot returns a PNG of the whole page.
func (p *Page) Screenshot() []byte {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	return png
}

// Errors returns the console's errors and uncaught exceptions so far.
func (p *Page) Errors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []string
	for _, m := range p.console {
		if m.Type == chromedp.ConsoleError || m.IsException() {
			errs = append(errs, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line+1))
		}
	}
	return errs
}

// CheckConsole fails the test for each error or exception the console
// holds.
func (p *Page) CheckConsole() {
	p.t.Helper()
	for _, e := range p.Errors() {
		p.t.Errorf("console: %s", e)
	}
}

func (p *Page) consoleText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, m := range p.console {
		fmt.Fprintf(&b, "  %s\n", m)
	}
	return b.String()
}
