package view

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// Metrics is the answer of /api/runs/NAME/metrics?from=OFFSET[&step=S]:
// the records of metrics.jsonl that start at byte OFFSET or later, up to
// the last complete line (a line still being written is left for the next
// request), at most maxMetricsBytes of them.
//
// A client follows a run by asking again from Offset, passing the step of
// the last record it holds as step. When the file no longer continues
// what the client read (a resumed run rewrote it without the records
// after its checkpoint: it is shorter than OFFSET, OFFSET is not at a line
// start, or the line before OFFSET is not of update step), the answer
// starts over from byte 0 with Reset set, and the client drops what it
// holds.
type Metrics struct {
	// Records are the JSON objects of the lines, as written.
	Records []json.RawMessage `json:"records"`
	// Offset is the byte offset to ask from next.
	Offset int64 `json:"offset"`
	// Size is the file's size when read.
	Size int64 `json:"size"`
	// Reset says the records start from byte 0 instead of OFFSET.
	Reset bool `json:"reset,omitempty"`
	// More says records past Offset are already there (the answer was
	// cut at maxMetricsBytes): ask again at once.
	More bool `json:"more,omitempty"`
	// Skipped lists lines that are not JSON objects, by byte offset.
	Skipped []string `json:"skipped,omitempty"`
}

// maxMetricsBytes bounds one answer's share of metrics.jsonl.
const maxMetricsBytes = 4 << 20

// lineCheckBytes bounds how far back from OFFSET the line before it is
// looked for (a record is a few hundred bytes).
const lineCheckBytes = 64 << 10

func (s *Server) metrics(w http.ResponseWriter, r *http.Request, name string) {
	q := r.URL.Query()
	from, step := int64(0), -1
	if v := q.Get("from"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			httpError(w, http.StatusBadRequest, fmt.Errorf("from=%q: want a byte offset >= 0", v))
			return
		}
		from = n
	}
	if v := q.Get("step"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			httpError(w, http.StatusBadRequest, fmt.Errorf("step=%q: want the update of the last record read, >= 0", v))
			return
		}
		step = n
	}
	m, err := s.ReadMetrics(name, from, step)
	if err != nil {
		httpError(w, http.StatusNotFound, err)
		return
	}
	writeJSON(w, m)
}

// ReadMetrics reads the run's metrics.jsonl from byte offset from; step,
// if >= 0, is the update of the record that ends at from (see Metrics).
func (s *Server) ReadMetrics(name string, from int64, step int) (Metrics, error) {
	p := name + "/metrics.jsonl"
	f, err := s.root.Open(p)
	if err != nil {
		return Metrics{}, fmt.Errorf("%s: %w", p, rootError(err))
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return Metrics{}, fmt.Errorf("%s: %w", p, rootError(err))
	}
	m := Metrics{Records: []json.RawMessage{}, Size: info.Size()}
	if from > 0 && !continues(f, from, m.Size, step) {
		from, m.Reset = 0, true
	}
	n := min(m.Size-from, maxMetricsBytes)
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, from)
	if err != nil && err != io.EOF {
		return Metrics{}, fmt.Errorf("%s: %w", p, rootError(err))
	}
	buf = buf[:got]
	end := bytes.LastIndexByte(buf, '\n') + 1
	if end == 0 && got == maxMetricsBytes {
		return Metrics{}, fmt.Errorf("%s: a line at byte %d is longer than %d bytes: not a metrics file", p, from, maxMetricsBytes)
	}
	m.Offset = from + int64(end)
	m.More = got == maxMetricsBytes && m.Offset < m.Size
	at := from
	for _, line := range bytes.SplitAfter(buf[:end], []byte("\n")) {
		start := at
		at += int64(len(line))
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if line[0] != '{' || !json.Valid(line) {
			m.Skipped = append(m.Skipped, fmt.Sprintf("byte %d: %q", start, truncate(string(line), 60)))
			continue
		}
		m.Records = append(m.Records, json.RawMessage(line))
	}
	return m, nil
}

// continues reports whether the file still holds what a client read up to
// byte from: from is within it, at a line start, and (step >= 0) the line
// before it is the record of update step.
func continues(f io.ReaderAt, from, size int64, step int) bool {
	if from > size {
		return false
	}
	back := min(from, lineCheckBytes)
	buf := make([]byte, back)
	if _, err := f.ReadAt(buf, from-back); err != nil {
		return false
	}
	if buf[len(buf)-1] != '\n' {
		return false
	}
	if step < 0 {
		return true
	}
	prev := buf[:len(buf)-1]
	prev = prev[bytes.LastIndexByte(prev, '\n')+1:]
	var rec struct {
		Step *int `json:"step"`
	}
	if json.Unmarshal(prev, &rec) != nil || rec.Step == nil {
		return false
	}
	return *rec.Step == step
}
