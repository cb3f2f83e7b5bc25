package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// LockFile is the name of the lock file in a run's folder.
const LockFile = "run.lock"

// A run folder is used by one process at a time. The lock is an advisory
// lock (flock) on RunsDir/Name/run.lock, taken without waiting, so two
// processes can never both hold it; the kernel releases it when its holder
// exits, however it exits. While held, the file names its holder (pid,
// host, start time, command line); a clean release empties it. A lock that
// is free but still names a holder was therefore left by a process that
// died without releasing it (kill -9, a crash, a power loss, or a holder on
// another host that this host cannot see): that stale lock is reported,
// never silently taken over. LockOptions.BreakStale takes it over.

// LockHolder is the record a lock file holds.
type LockHolder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"`
	Command string    `json:"command,omitempty"`
}

func (h LockHolder) String() string {
	s := fmt.Sprintf("pid %d on host %s", h.PID, h.Host)
	if !h.Started.IsZero() {
		s += ", since " + h.Started.Local().Format("2006-01-02 15:04:05")
	}
	if h.Command != "" {
		s += fmt.Sprintf(" (%s)", h.Command)
	}
	return s
}

// ErrLocked is matched (errors.Is) by the error of LockRun when another
// process holds the run's lock or a stale lock is in the way.
var ErrLocked = errors.New("train: run is locked")

// LockError says who holds (or held) a run's lock.
type LockError struct {
	Path   string
	Holder LockHolder
	// Stale is set when no live process holds the lock: the holder named
	// in the file stopped without releasing it.
	Stale bool
	// HolderGone is set when the holder is known not to be running (same
	// host, no such process).
	HolderGone bool
	// Unreadable holds why the holder record could not be read, if so.
	Unreadable string
}

func (e *LockError) Error() string {
	holder := e.Holder.String()
	if e.Unreadable != "" {
		holder = "an unknown process (" + e.Unreadable + ")"
	}
	if !e.Stale {
		return fmt.Sprintf("%s: the run is in use by %s; two processes cannot train one run (wait for it, stop it, or pick another -name)", e.Path, holder)
	}
	why := "that process stopped without releasing it (a crash, kill -9 or a power loss)"
	switch {
	case e.HolderGone:
		why = fmt.Sprintf("pid %d is no longer running: it stopped without releasing the lock (a crash, kill -9 or a power loss)", e.Holder.PID)
	case e.Unreadable == "" && e.Holder.Host != hostname():
		why = fmt.Sprintf("no process holds it here, and this host (%s) cannot tell whether that process still runs on %s", hostname(), e.Holder.Host)
	case e.Unreadable == "":
		why = fmt.Sprintf("pid %d does not hold it (that number may now belong to another process); the run's process stopped without releasing it (a crash, kill -9 or a power loss)", e.Holder.PID)
	}
	return fmt.Sprintf("%s: stale lock left by %s; %s. If no process uses this run, pass -break-lock to take the lock over (or empty the file)", e.Path, holder, why)
}

func (e *LockError) Is(target error) bool { return target == ErrLocked }

// LockOptions tunes LockRun.
type LockOptions struct {
	// BreakStale takes over a stale lock (see LockError.Stale). A lock held
	// by a live process is never taken over.
	BreakStale bool
	// Command is recorded in the lock file to tell users what holds it.
	Command string
}

// RunLock is a held run lock; Unlock releases it.
type RunLock struct {
	path string
	dir  string
	f    *os.File
	// Broken is the stale holder whose lock was taken over, if any.
	Broken *LockHolder
}

// Dir returns the run folder the lock protects.
func (l *RunLock) Dir() string { return l.dir }

// Path returns the lock file.
func (l *RunLock) Path() string { return l.path }

// LockRun takes the lock of the run folder dir (created if missing) for
// this process. It fails with a *LockError (errors.Is(err, ErrLocked)) when
// another process holds it or a stale lock is found.
func LockRun(dir string, opts LockOptions) (*RunLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("train: lock: %w", err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("train: lock %s: %w", path, err)
	}
	prev, unreadable, empty := readHolder(f)
	if !held {
		f.Close()
		return nil, &LockError{Path: path, Holder: prev, Unreadable: unreadable}
	}
	l := &RunLock{path: path, dir: dir, f: f}
	if !empty {
		lerr := &LockError{Path: path, Holder: prev, Unreadable: unreadable, Stale: true}
		if unreadable == "" && prev.Host == hostname() && !processRunning(prev.PID) {
			lerr.HolderGone = true
		}
		if !opts.BreakStale {
			unlock(f)
			f.Close()
			return nil, lerr
		}
		l.Broken = &prev
	}
	me := LockHolder{PID: os.Getpid(), Host: hostname(), Started: time.Now().UTC().Truncate(time.Second), Command: opts.Command}
	rec, _ := json.Marshal(me)
	rec = append(rec, '\n')
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(rec, 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		l.release()
		return nil, fmt.Errorf("train: lock %s: %w", path, err)
	}
	return l, nil
}

// Unlock releases the lock: the file is emptied (a clean release) and
// unlocked. It is safe to call more than once.
func (l *RunLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := firstError(l.f.Truncate(0), l.f.Sync())
	l.release()
	if err != nil {
		return fmt.Errorf("train: unlock %s: %w", l.path, err)
	}
	return nil
}

func (l *RunLock) release() {
	unlock(l.f)
	l.f.Close()
	l.f = nil
}

// readHolder reads the holder record of an open lock file; empty reports a
// file with nothing but white space (a free lock).
func readHolder(f *os.File) (h LockHolder, unreadable string, empty bool) {
	info, err := f.Stat()
	if err != nil {
		return h, err.Error(), false
	}
	buf := make([]byte, min(info.Size(), 1<<16))
	n, _ := f.ReadAt(buf, 0)
	buf = buf[:n]
	if strings.TrimSpace(string(buf)) == "" {
		return h, "", true
	}
	if err := json.Unmarshal(buf, &h); err != nil || h.PID <= 0 {
		return h, fmt.Sprintf("its record %q is unreadable", truncateString(string(buf), 80)), false
	}
	return h, "", false
}

// LockHolderRunning reports whether h, the holder a run's lock file names,
// is a process running on this host. It is false for a holder on another
// host, whose liveness this host cannot see, and for a pid that no longer
// exists; a pid reused by another process still counts as running. hilbert
// view tells running runs from interrupted ones with it, without taking the
// lock.
func LockHolderRunning(h LockHolder) bool {
	return h.PID > 0 && h.Host == hostname() && processRunning(h.PID)
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown"
	}
	return h
}

func truncateString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
