package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hilbert-ml/hilbert/view"
)

func init() {
	register(subcommand{
		name:    "view",
		summary: "serve the run dashboard: live curves of the runs under -runs, their settings and compare reports",
		run:     runView,
	})
}

const viewUsage = `usage: hilbert view [-runs DIR] [-addr 127.0.0.1:PORT] [-public]

Serves a dashboard of the runs under DIR (every folder with a
metrics.jsonl, hilbert compare's runs included) at http://ADDR/ until
interrupted: their status (running, finished, interrupted), updates,
throughput and final losses; for the runs ticked, the training and
validation loss, D(S_t) with RowNorm's bound 2·lr_t, the Hilbert RMS, the
learning rates, the gradient norm and the throughput, followed live as the
runs append to metrics.jsonl; a run's summary.md and settings, the settings
in which the ticked runs differ, and compare.md. The page is part of the
binary: it loads nothing from the network. Nothing outside DIR is served.

The address is a loopback one by default, and requests must name the host
as localhost or a loopback address (so that a web page elsewhere cannot
read the dashboard by DNS rebinding); another address (reachable from
other machines, with no authentication) needs -public.

flags:
`

// viewContext is the context hilbert view serves under: cancelled by
// SIGINT or SIGTERM. Tests replace it.
var viewContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func runView(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("view", viewUsage, stderr)
	var (
		runs, addr string
		public     bool
	)
	fs.StringVar(&runs, "runs", "runs", "the runs `folder` (train's -runs)")
	fs.StringVar(&addr, "addr", "127.0.0.1:6007", "`host:port` to listen on (port 0: any free one)")
	fs.BoolVar(&public, "public", false, "allow an address other than a loopback one (the dashboard has no authentication)")
	if stop, err := parseCommand(fs, args); stop {
		return err
	}
	if err := checkViewAddr(addr, public); err != nil {
		return usageErr("view", err)
	}
	srv, err := view.New(runs)
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("-addr %s: %w", addr, err)
	}
	var h http.Handler = srv
	if !public {
		h = loopbackHostOnly(srv)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := viewContext()
	defer stop()
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	fmt.Fprintf(stdout, "hilbert view: the runs in %s at http://%s/ (interrupt to stop)\n", runs, ln.Addr())
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return err
	}
	return nil
}

// checkViewAddr accepts host:port with a loopback host (an IP or
// "localhost"), or any host with public.
func checkViewAddr(addr string, public bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %w (want host:port, such as 127.0.0.1:6007)", addr, err)
	}
	if port == "" {
		return fmt.Errorf("-addr %q: no port (want host:port, such as 127.0.0.1:6007)", addr)
	}
	if ip := net.ParseIP(host); public || host == "localhost" || ip != nil && ip.IsLoopback() {
		return nil
	}
	what := host
	if host == "" {
		what = "every interface"
	}
	return fmt.Errorf("-addr %q listens on %s, not a loopback address: the dashboard has no authentication, so pass -public to serve it to other machines", addr, what)
}

// loopbackHostOnly refuses (403) a request whose Host is not localhost or
// a loopback address: a page elsewhere whose name resolves to 127.0.0.1
// (DNS rebinding) cannot read the dashboard through the user's browser.
func loopbackHostOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if hp, _, err := net.SplitHostPort(host); err == nil {
			host = hp
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		ip := net.ParseIP(host)
		if !strings.EqualFold(host, "localhost") && (ip == nil || !ip.IsLoopback()) {
			http.Error(w, fmt.Sprintf("hilbert view: host %q is not a loopback name or address; this dashboard serves only http://127.0.0.1 or http://localhost (or start it with -public)", r.Host), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
