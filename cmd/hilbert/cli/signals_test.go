package cli

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalsProcess is the child of TestNohupIgnoresHangup: it installs
// train's signal handling, sends itself SIGHUP and then SIGINT, and exits
// once the run would stop (trainSignals prints which signal stopped it).
func TestSignalsProcess(t *testing.T) {
	if os.Getenv("HILBERT_TEST_SIGNALS") == "" {
		t.Skip("the child of TestNohupIgnoresHangup")
	}
	ctx, stop := trainSignals(os.Stderr, false)
	defer stop()
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	// Two signals sent back to back may reach the handler in either
	// order (seen in CI under load): let the first be handled first.
	time.Sleep(200 * time.Millisecond)
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	<-ctx.Done()
}

// Started under nohup (SIGHUP ignored), a run stays ignoring it: the hangup
// neither kills it nor stops it, and the next signal is the one that does.
func TestNohupIgnoresHangup(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a process")
	}
	for _, c := range []struct {
		name, trap, want string
	}{
		{"plain", "", "hangup: stopping after the current update"},
		{"nohup", `trap "" HUP;`, "interrupt: stopping after the current update"},
	} {
		cmd := exec.Command("sh", "-c", c.trap+` exec "$0" -test.run='^TestSignalsProcess$'`, os.Args[0])
		cmd.Env = append(os.Environ(), "HILBERT_TEST_SIGNALS=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: %v; output %q, want %q first", c.name, err, out, c.want)
		}
		if c.trap != "" && strings.Contains(string(out), "hangup") {
			t.Errorf("%s: the ignored SIGHUP was caught: %q", c.name, out)
		}
	}
}
