// Package view is hilbert view's run dashboard: an http.Handler that lists
// the runs under a runs folder, as package train writes them, and serves
// a page (its HTML, JavaScript and CSS embedded in the binary: no network,
// no CDN) that draws their curves, follows running runs live and compares
// their settings.
//
// It reads what train writes and nothing else: RUNS/NAME/metrics.jsonl
// (append-only JSON lines, read by byte offset so a running run's new
// records cost only their own bytes), checkpoints/latest.json and the
// state.json it names (the settings), summary.md, run.lock (whose holder,
// alive, means the run is running) and the compare.md of hilbert compare.
// It writes nothing and takes no lock. Like the commands, it sits on top:
// it imports train for its record and lock types, and never cmd.
//
// Every file is opened through an os.Root of the runs folder, and a run is
// served only where the listing shows it (its path's folders real ones,
// not links), so nothing outside the folder is ever served: not through
// "..", an absolute path or a symbolic link that leads out of it.
//
// The JSON API, under /api/:
//
//	GET /api/runs                            the runs and comparisons (see Listing)
//	GET /api/runs/NAME/metrics?from=N&step=S the records of metrics.jsonl from byte N (see Metrics)
//	GET /api/runs/NAME/summary               summary.md, as Markdown and as HTML (see Document)
//	GET /api/compare/NAME                    a comparison folder's compare.md (NAME empty: the runs folder's own)
//	GET /files/PATH                          a PNG under the runs folder (the plots summary.md and compare.md show)
//
// NAME is a run's folder relative to the runs folder, with slashes (a
// hilbert compare run is COMPARISON/HEAD-seedK).
package view

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
)

//go:embed assets
var assets embed.FS

// Server is the dashboard's http.Handler over one runs folder.
type Server struct {
	dir  string
	root *os.Root
	mux  *http.ServeMux

	mu    sync.Mutex
	cache map[string]*runCache // parsed metrics by run name, see runs.go
}

// New returns the dashboard of the runs folder dir, which must exist.
// Close releases it.
func New(dir string) (*Server, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("view: runs folder: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("view: runs folder %s is not a folder", dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("view: runs folder: %w", err)
	}
	if _, err := root.Stat("metrics.jsonl"); err == nil {
		root.Close()
		return nil, fmt.Errorf("view: %s is a run's folder (it holds metrics.jsonl): pass the folder that holds the runs, %s", dir, filepath.Dir(filepath.Clean(dir)))
	}
	s := &Server{dir: dir, root: root, mux: http.NewServeMux(), cache: map[string]*runCache{}}
	static, _ := fs.Sub(assets, "assets")
	s.mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /{$}", s.index)
	s.mux.HandleFunc("GET /api/runs", s.listRuns)
	s.mux.HandleFunc("GET /api/runs/{rest...}", s.runResource)
	s.mux.HandleFunc("GET /api/compare/{name...}", s.compare)
	s.mux.HandleFunc("GET /files/{file...}", s.file)
	return s, nil
}

// Dir returns the runs folder.
func (s *Server) Dir() string { return s.dir }

// Close releases the runs folder.
func (s *Server) Close() error { return s.root.Close() }

// ServeHTTP serves the page, its assets and the API. A path with an
// empty, "." or ".." element (after decoding, so %2e%2e and %2f count) is
// refused with 400 before any routing, as is one with a backslash or NUL.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := checkRequestPath(r.URL.Path); err != nil {
		httpError(w, http.StatusBadRequest, err)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	s.mux.ServeHTTP(w, r)
}

// checkRequestPath refuses a URL path that is not plain: it must start
// with "/" and have no empty, "." or ".." element (a trailing "/" aside),
// no backslash and no NUL.
func checkRequestPath(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("path %q is not absolute", p)
	}
	if strings.ContainsAny(p, "\\\x00") {
		return fmt.Errorf("path %q holds a backslash or NUL", p)
	}
	elems := strings.Split(strings.TrimSuffix(p[1:], "/"), "/")
	if len(elems) == 1 && elems[0] == "" {
		return nil // "/"
	}
	for _, e := range elems {
		if e == "" || e == "." || e == ".." {
			return fmt.Errorf("path %q has an element %q: only plain names are served", p, e)
		}
	}
	return nil
}

// localName checks a name taken from a URL (a run, a comparison, a file)
// as a path below the runs folder: slash-separated plain elements, local
// in filepath.IsLocal's sense. The empty name is the runs folder itself
// when allowEmpty.
func localName(name string, allowEmpty bool) error {
	if name == "" {
		if allowEmpty {
			return nil
		}
		return errors.New("no name")
	}
	if !fs.ValidPath(name) || path.Clean(name) != name || strings.ContainsAny(name, "\\\x00:") {
		return fmt.Errorf("%q is not a plain path below the runs folder", name)
	}
	return nil
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	b, err := assets.ReadFile("assets/index.html")
	if err != nil {
		httpError(w, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(b)
}

// runResource serves /api/runs/NAME/metrics and /api/runs/NAME/summary.
func (s *Server) runResource(w http.ResponseWriter, r *http.Request) {
	rest := r.PathValue("rest")
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		httpError(w, http.StatusNotFound, fmt.Errorf("no such resource %q: want /api/runs/NAME/metrics or /api/runs/NAME/summary", r.URL.Path))
		return
	}
	name, what := rest[:i], rest[i+1:]
	if err := localName(name, false); err != nil {
		httpError(w, http.StatusBadRequest, fmt.Errorf("run name: %w", err))
		return
	}
	if !s.isRun(name) {
		httpError(w, http.StatusNotFound, fmt.Errorf("no run %q under the runs folder", name))
		return
	}
	switch what {
	case "metrics":
		s.metrics(w, r, name)
	case "summary":
		s.document(w, name, "summary.md")
	default:
		httpError(w, http.StatusNotFound, fmt.Errorf("run %q has no resource %q: want metrics or summary", name, what))
	}
}

// compare serves a comparison folder's compare.md.
func (s *Server) compare(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSuffix(r.PathValue("name"), "/")
	if err := localName(name, true); err != nil {
		httpError(w, http.StatusBadRequest, fmt.Errorf("comparison name: %w", err))
		return
	}
	s.document(w, name, "compare.md")
}

// file serves a PNG below the runs folder.
func (s *Server) file(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if err := localName(name, false); err != nil {
		httpError(w, http.StatusBadRequest, err)
		return
	}
	if path.Ext(name) != ".png" {
		httpError(w, http.StatusNotFound, fmt.Errorf("%q: only the .png plots of runs are served", name))
		return
	}
	f, err := s.root.Open(name)
	if err != nil {
		httpError(w, http.StatusNotFound, fmt.Errorf("%s: %w", name, rootError(err)))
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		httpError(w, http.StatusNotFound, fmt.Errorf("%s is not a file", name))
		return
	}
	w.Header().Set("Content-Type", "image/png")
	http.ServeContent(w, r, name, info.ModTime(), f)
}

// rootError shortens an error of the os.Root to what it says, without the
// runs folder's own path.
func rootError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// writeJSON writes v as the JSON response.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	b, err := json.Marshal(v)
	if err != nil {
		httpError(w, http.StatusInternalServerError, err)
		return
	}
	w.Write(b)
}

// httpError writes {"error": "..."} with the status code.
func httpError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]string{"error": err.Error()})
	w.Write(b)
}
