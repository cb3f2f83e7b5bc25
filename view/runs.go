package view

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hilbert-ml/hilbert/train"
)

// Status values of a run.
const (
	// StatusRunning: run.lock names a live process on this host (or a
	// process on another host, whose liveness this host cannot check).
	StatusRunning = "running"
	// StatusFinished: the lock is free and the latest checkpoint is of
	// the run's last update.
	StatusFinished = "finished"
	// StatusInterrupted: anything else (stopped by a signal before its
	// last update, or killed with its lock left behind).
	StatusInterrupted = "interrupted"
)

// Run is one run of the listing.
type Run struct {
	// Name is the run's folder below the runs folder, slash-separated.
	Name string `json:"name"`
	// Model describes the model (summary.md's model row, else the shape
	// from the settings); empty before the first checkpoint.
	Model string `json:"model,omitempty"`
	// Head and Seed are the head optimizer and the model seed, from the
	// settings; empty before the first checkpoint.
	Head string `json:"head,omitempty"`
	Seed string `json:"seed,omitempty"`
	// Status is StatusRunning, StatusFinished or StatusInterrupted;
	// StatusDetail says why, when it is not plain.
	Status       string `json:"status"`
	StatusDetail string `json:"status_detail,omitempty"`
	// Updates is the last logged update; Steps the run's planned number
	// of updates (0: unknown before the first checkpoint).
	Updates int   `json:"updates"`
	Steps   int   `json:"steps,omitempty"`
	Tokens  int64 `json:"tokens"`
	// TokensPerS is the mean throughput over the logged updates.
	TokensPerS float64 `json:"tokens_per_s"`
	// The last logged values (absent where the run logged none).
	Loss       *float64 `json:"loss,omitempty"`
	ValLoss    *float64 `json:"val_loss,omitempty"`
	Diameter   *float64 `json:"diameter,omitempty"`
	HilbertRMS *float64 `json:"hilbert_rms,omitempty"`
	// Settings are the latest checkpoint's settings (what changes the
	// run's numbers; see train's state.json).
	Settings map[string]string `json:"settings,omitempty"`
	// Command is the command line of the process holding the run's lock.
	Command string `json:"command,omitempty"`
	// HasSummary reports a summary.md.
	HasSummary bool `json:"has_summary"`
	// MetricsBytes is the size of metrics.jsonl; Modified its time.
	MetricsBytes int64     `json:"metrics_bytes"`
	Modified     time.Time `json:"modified"`
	// Warnings say what could not be read (a damaged line, say).
	Warnings []string `json:"warnings,omitempty"`
}

// Comparison is a folder holding a hilbert compare report.
type Comparison struct {
	// Name is the folder below the runs folder ("" for the runs folder).
	Name string `json:"name"`
	// Runs are the runs inside it.
	Runs []string `json:"runs"`
}

// Listing is the answer of /api/runs.
type Listing struct {
	// Dir is the runs folder as the server was given it.
	Dir         string       `json:"dir"`
	Runs        []Run        `json:"runs"`
	Comparisons []Comparison `json:"comparisons"`
}

// maxDepth bounds how deep below the runs folder runs are looked for
// (a compare run is two folders down).
const maxDepth = 4

// skipDirs are the folders of a run that hold no runs.
var skipDirs = map[string]bool{"checkpoints": true, "data": true, "tb": true}

// discover walks the runs folder, without following symbolic links, for
// run folders (those with a metrics.jsonl) and comparison folders (those
// with a compare.md).
func (s *Server) discover() (runs, comparisons []string, err error) {
	err = fs.WalkDir(s.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			return nil // an unreadable folder holds no run we can show
		}
		if !d.IsDir() {
			switch {
			case !d.Type().IsRegular():
			case d.Name() == "metrics.jsonl" && p != "metrics.jsonl":
				runs = append(runs, path.Dir(p))
			case d.Name() == "compare.md":
				comparisons = append(comparisons, path.Dir(p))
			}
			return nil
		}
		if p != "." && (skipDirs[d.Name()] || strings.HasPrefix(d.Name(), ".") || strings.Count(p, "/") >= maxDepth) {
			return fs.SkipDir
		}
		return nil
	})
	return runs, comparisons, err
}

// isRun reports whether name is a run folder the listing shows (see
// discover): each of its elements a folder, not a link, that the walk
// enters, and its metrics.jsonl a regular file.
func (s *Server) isRun(name string) bool {
	elems := strings.Split(name, "/")
	if localName(name, false) != nil || len(elems) > maxDepth {
		return false
	}
	for i, e := range elems {
		if skipDirs[e] || strings.HasPrefix(e, ".") {
			return false
		}
		info, err := s.root.Lstat(strings.Join(elems[:i+1], "/"))
		if err != nil || !info.IsDir() {
			return false
		}
	}
	info, err := s.root.Lstat(name + "/metrics.jsonl")
	return err == nil && info.Mode().IsRegular()
}

// List returns the runs and comparisons under the runs folder, sorted by
// name.
func (s *Server) List() (Listing, error) {
	names, comps, err := s.discover()
	if err != nil {
		return Listing{}, fmt.Errorf("view: %s: %w", s.dir, err)
	}
	l := Listing{Dir: s.dir, Runs: []Run{}, Comparisons: []Comparison{}}
	for _, n := range names {
		l.Runs = append(l.Runs, s.run(n))
	}
	sort.Slice(l.Runs, func(i, j int) bool { return l.Runs[i].Name < l.Runs[j].Name })
	for _, c := range comps {
		cmp := Comparison{Name: c, Runs: []string{}}
		if c == "." {
			cmp.Name = ""
		}
		for _, r := range l.Runs {
			if cmp.Name == "" || strings.HasPrefix(r.Name, cmp.Name+"/") {
				cmp.Runs = append(cmp.Runs, r.Name)
			}
		}
		l.Comparisons = append(l.Comparisons, cmp)
	}
	sort.Slice(l.Comparisons, func(i, j int) bool { return l.Comparisons[i].Name < l.Comparisons[j].Name })
	return l, nil
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	l, err := s.List()
	if err != nil {
		httpError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, l)
}

// runCache holds a run's parsed metrics while the file is unchanged.
type runCache struct {
	size    int64
	mod     time.Time
	records []train.Record
	warn    []string
}

// run reads one run's listing entry. What cannot be read is left out,
// with a warning; it is never an error of the listing.
func (s *Server) run(name string) Run {
	r := Run{Name: name}
	recs, info, warn := s.records(name)
	r.Warnings = append(r.Warnings, warn...)
	if info != nil {
		r.MetricsBytes, r.Modified = info.Size(), info.ModTime().UTC()
	}
	sum := train.Summarize(train.Config{}, recs)
	r.Updates, r.Tokens, r.TokensPerS = sum.Steps, sum.Tokens, sum.TokensPerS
	finite := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	for _, rec := range recs {
		if rec.Step > 0 { // update 0 has a validation loss only
			r.Loss = finite(sum.FinalLoss)
			break
		}
	}
	r.ValLoss, r.Diameter, r.HilbertRMS = finite(sum.ValLoss), finite(sum.Diameter), finite(sum.HilbertRMS)
	if math.IsNaN(sum.ValLoss) && !math.IsNaN(sum.StartValLoss) {
		r.ValLoss = finite(sum.StartValLoss)
	}

	ckStep, state, err := s.latestState(name)
	if err != nil {
		r.Warnings = append(r.Warnings, err.Error())
	}
	if state != nil {
		r.Settings, r.Steps = state.Settings, state.Steps
		r.Head, r.Seed = state.Settings["head"], state.Settings["seed"]
		if r.Head == "" {
			r.Head = strings.ToLower(state.Head)
		}
		if r.Seed == "" && state.Settings == nil {
			r.Seed = strconv.FormatUint(state.Seed, 10)
		}
		if set := state.Settings; set["dim"] != "" {
			r.Model = fmt.Sprintf("d %s, %s layers, vocabulary %s, context %s", set["dim"], set["layers"], set["vocab"], set["context"])
		}
	}
	if md, err := s.root.ReadFile(name + "/summary.md"); err == nil {
		r.HasSummary = true
		if m := markdownTableValue(string(md), "model"); m != "" {
			r.Model = m
		}
	}

	holder, held, lerr := s.lockHolder(name)
	switch {
	case lerr != nil:
		r.Warnings = append(r.Warnings, lerr.Error())
		r.Status, r.StatusDetail = StatusInterrupted, "run.lock is unreadable"
	case held && train.LockHolderRunning(holder):
		r.Status, r.Command = StatusRunning, holder.Command
		r.StatusDetail = fmt.Sprintf("pid %d", holder.PID)
	case held && holder.Host != thisHost():
		r.Status, r.Command = StatusRunning, holder.Command
		r.StatusDetail = fmt.Sprintf("pid %d on host %s (this host cannot tell whether it still runs)", holder.PID, holder.Host)
	case held:
		r.Status = StatusInterrupted
		r.StatusDetail = fmt.Sprintf("pid %d stopped without releasing run.lock (a crash or kill -9)", holder.PID)
	case state != nil && state.Steps > 0 && ckStep >= state.Steps:
		r.Status = StatusFinished
	case state != nil:
		r.Status = StatusInterrupted
		r.StatusDetail = fmt.Sprintf("checkpoint at update %d of %d", ckStep, state.Steps)
	default:
		r.Status, r.StatusDetail = StatusInterrupted, "no checkpoint"
	}
	return r
}

// records returns the run's parsed metrics (cached while the file's size
// and time are unchanged) and the file's information. Lines that do not
// parse are skipped with a warning, a torn last line silently (a running
// run may be writing it).
func (s *Server) records(name string) ([]train.Record, fs.FileInfo, []string) {
	p := name + "/metrics.jsonl"
	f, err := s.root.Open(p)
	if err != nil {
		return nil, nil, []string{fmt.Sprintf("%s: %v", p, rootError(err))}
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, []string{fmt.Sprintf("%s: %v", p, rootError(err))}
	}
	s.mu.Lock()
	c := s.cache[name]
	s.mu.Unlock()
	if c != nil && c.size == info.Size() && c.mod.Equal(info.ModTime()) {
		return c.records, info, c.warn
	}
	c = &runCache{size: info.Size(), mod: info.ModTime()}
	data, err := io.ReadAll(io.LimitReader(f, info.Size()))
	if err != nil {
		return nil, info, []string{fmt.Sprintf("%s: %v", p, rootError(err))}
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var rec train.Record
		if err := json.Unmarshal(line, &rec); err != nil {
			c.warn = append(c.warn, fmt.Sprintf("%s line %d: %v", p, n, err))
			continue
		}
		c.records = append(c.records, rec)
	}
	s.mu.Lock()
	s.cache[name] = c
	s.mu.Unlock()
	return c.records, info, c.warn
}

// checkpointState is what the listing reads of a checkpoint's state.json.
type checkpointState struct {
	Step     int               `json:"step"`
	Steps    int               `json:"steps"`
	Head     string            `json:"head"`
	Seed     uint64            `json:"seed"`
	Settings map[string]string `json:"settings"`
}

// latestState reads the run's checkpoints/latest.json and the state.json
// of the checkpoint it names; nil without a checkpoint.
func (s *Server) latestState(name string) (int, *checkpointState, error) {
	ptrPath := name + "/checkpoints/latest.json"
	raw, err := s.root.ReadFile(ptrPath)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %v", ptrPath, rootError(err))
	}
	var ptr struct {
		Dir  string `json:"dir"`
		Step int    `json:"step"`
	}
	if err := json.Unmarshal(raw, &ptr); err != nil {
		return 0, nil, fmt.Errorf("%s: %v", ptrPath, err)
	}
	if localName(ptr.Dir, false) != nil || strings.Contains(ptr.Dir, "/") {
		return 0, nil, fmt.Errorf("%s: dir %q is not a folder of the checkpoints folder", ptrPath, ptr.Dir)
	}
	statePath := name + "/checkpoints/" + ptr.Dir + "/state.json"
	raw, err = s.root.ReadFile(statePath)
	if err != nil {
		// A running run may have replaced the checkpoint between the
		// two reads; the next listing finds the new one.
		return 0, nil, fmt.Errorf("%s: %v", statePath, rootError(err))
	}
	var st checkpointState
	if err := json.Unmarshal(raw, &st); err != nil {
		return 0, nil, fmt.Errorf("%s: %v", statePath, err)
	}
	return st.Step, &st, nil
}

// lockHolder reads the run's run.lock: held is false for a missing or
// empty file (a free lock).
func (s *Server) lockHolder(name string) (h train.LockHolder, held bool, err error) {
	p := name + "/" + train.LockFile
	raw, err := s.root.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return h, false, nil
	}
	if err != nil {
		return h, false, fmt.Errorf("%s: %v", p, rootError(err))
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return h, false, nil
	}
	if err := json.Unmarshal(raw, &h); err != nil || h.PID <= 0 {
		return h, false, fmt.Errorf("%s: its record %q is unreadable", p, truncate(string(raw), 80))
	}
	return h, true, nil
}

func thisHost() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown"
	}
	return h
}

// markdownTableValue returns the value of the row whose first cell is key
// in the first Markdown table of md that has one ("" if none).
func markdownTableValue(md, key string) string {
	for _, line := range strings.Split(md, "\n") {
		cells := tableCells(line)
		if len(cells) >= 2 && cells[0] == key {
			return cells[1]
		}
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
