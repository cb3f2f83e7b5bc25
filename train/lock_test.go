//go:build unix

package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hilbert-ml/hilbert/device/cpu"
)

// deadPID returns the pid of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func writeHolder(t *testing.T, dir string, h LockHolder) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	b, _ := json.Marshal(h)
	if err := os.WriteFile(filepath.Join(dir, LockFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Two trainers of one run cannot both run: the second fails at once,
// naming the holder, and succeeds once the first is closed.
func TestSecondTrainerOfARunIsRefused(t *testing.T) {
	shards, val := writeTinyShards(t, t.TempDir())
	cfg := tinyConfig(t, t.TempDir(), shards, val)
	first, err := New(cpu.New(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(cpu.New(), cfg)
	var le *LockError
	if !errors.Is(err, ErrLocked) || !errors.As(err, &le) || le.Stale {
		t.Fatalf("second trainer: %v", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("in use by pid %d on host", os.Getpid())) {
		t.Errorf("the error does not name the holder: %v", err)
	}
	// A lock held by a live process is never broken.
	if _, err := LockRun(first.Dir(), LockOptions{BreakStale: true}); !errors.Is(err, ErrLocked) {
		t.Errorf("BreakStale took a live lock: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(first.Dir(), LockFile)); len(b) != 0 {
		t.Errorf("a released lock file holds %q", b)
	}
	second, err := New(cpu.New(), cfg)
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	second.Close()
}

// A lock left by a process that died is reported, with how to take it
// over, and never silently broken.
func TestStaleLockIsReported(t *testing.T) {
	shards, val := writeTinyShards(t, t.TempDir())
	cfg := tinyConfig(t, t.TempDir(), shards, val)
	dir := filepath.Join(cfg.RunsDir, cfg.Name)
	host, _ := os.Hostname()
	dead := LockHolder{PID: deadPID(t), Host: host, Started: time.Now().Add(-time.Hour).UTC(), Command: "hilbert train -name tiny"}
	writeHolder(t, dir, dead)
	before, _ := os.ReadFile(filepath.Join(dir, LockFile))

	_, err := New(cpu.New(), cfg)
	var le *LockError
	if !errors.As(err, &le) || !le.Stale || !le.HolderGone {
		t.Fatalf("stale lock: %v", err)
	}
	for _, want := range []string{"stale lock", fmt.Sprintf("pid %d is no longer running", dead.PID), "-break-lock", "hilbert train -name tiny"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if after, _ := os.ReadFile(filepath.Join(dir, LockFile)); string(after) != string(before) {
		t.Errorf("the stale lock was changed: %q -> %q", before, after)
	}

	// Another host's holder: this host cannot tell, and says so.
	writeHolder(t, dir, LockHolder{PID: 42, Host: "elsewhere"})
	if _, err := LockRun(dir, LockOptions{}); err == nil || !strings.Contains(err.Error(), "cannot tell whether that process still runs on elsewhere") {
		t.Errorf("other host's lock: %v", err)
	}
	// An unreadable record.
	os.WriteFile(filepath.Join(dir, LockFile), []byte("garbage"), 0o644)
	if _, err := LockRun(dir, LockOptions{}); err == nil || !strings.Contains(err.Error(), "unreadable") {
		t.Errorf("unreadable lock: %v", err)
	}

	// BreakStale takes it over and says whose it was.
	writeHolder(t, dir, dead)
	l, err := LockRun(dir, LockOptions{BreakStale: true, Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if l.Broken == nil || l.Broken.PID != dead.PID {
		t.Errorf("Broken = %+v", l.Broken)
	}
	var h LockHolder
	b, _ := os.ReadFile(filepath.Join(dir, LockFile))
	if err := json.Unmarshal(b, &h); err != nil || h.PID != os.Getpid() || h.Command != "test" {
		t.Errorf("the taken lock holds %q", b)
	}
	l.Unlock()
}

// A killed holder (kill -9: no chance to release) leaves a stale lock,
// which the next start reports instead of running over it.
func TestKilledHolderLeavesAStaleLock(t *testing.T) {
	if os.Getenv("HILBERT_LOCK_HOLDER") != "" {
		if _, err := LockRun(os.Getenv("HILBERT_LOCK_HOLDER"), LockOptions{Command: "holder"}); err != nil {
			os.Exit(3)
		}
		fmt.Println("locked")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	dir := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledHolderLeavesAStaleLock$")
	cmd.Env = append(os.Environ(), "HILBERT_LOCK_HOLDER="+dir)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil || string(buf) != "locked" {
		t.Fatalf("holder: %q %v", buf, err)
	}
	if _, err := LockRun(dir, LockOptions{BreakStale: true}); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("in use by pid %d", cmd.Process.Pid)) {
		t.Errorf("while the holder runs: %v", err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	_, err := LockRun(dir, LockOptions{})
	var le *LockError
	if !errors.As(err, &le) || !le.Stale || le.Holder.PID != cmd.Process.Pid || le.Holder.Command != "holder" {
		t.Fatalf("after kill -9: %v", err)
	}
	l, err := LockRun(dir, LockOptions{BreakStale: true})
	if err != nil {
		t.Fatal(err)
	}
	l.Unlock()
}

// Output files are created 0644 (less the umask), not os.CreateTemp's
// 0600.
func TestOutputFileModes(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	shards, val := writeTinyShards(t, t.TempDir())
	cfg := tinyConfig(t, t.TempDir(), shards, val)
	cfg.Steps = 4
	tr, err := runToEnd(t, cfg, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"metrics.jsonl", "summary.md", "loss.png", "diameter.png", "hilbert_rms.png", LockFile,
		"checkpoints/latest.json", "checkpoints/step-0000004/state.json", "checkpoints/step-0000004/model.safetensors", "checkpoints/step-0000004/optim.safetensors"} {
		info, err := os.Stat(filepath.Join(tr.Dir(), f))
		if err != nil {
			t.Error(err)
			continue
		}
		if m := info.Mode().Perm(); m != 0o644 {
			t.Errorf("%s: mode %o, want 644", f, m)
		}
	}
}

func TestLockHolderRunning(t *testing.T) {
	for _, c := range []struct {
		name string
		h    LockHolder
		want bool
	}{
		{"this process", LockHolder{PID: os.Getpid(), Host: hostname()}, true},
		{"an exited process", LockHolder{PID: deadPID(t), Host: hostname()}, false},
		{"another host", LockHolder{PID: os.Getpid(), Host: hostname() + "-elsewhere"}, false},
		{"no pid", LockHolder{Host: hostname()}, false},
	} {
		if got := LockHolderRunning(c.h); got != c.want {
			t.Errorf("%s (%v): LockHolderRunning = %v, want %v", c.name, c.h, got, c.want)
		}
	}
}
