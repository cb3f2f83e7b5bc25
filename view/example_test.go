package view_test

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/hilbert-ml/hilbert/view"
)

// A client of the API lists the runs, then follows one's metrics from the
// byte offset the last answer gave.
func Example() {
	runs, err := os.MkdirTemp("", "runs")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(runs)
	metrics := filepath.Join(runs, "opticks", "metrics.jsonl")
	os.MkdirAll(filepath.Dir(metrics), 0o755)
	os.WriteFile(metrics, []byte(`{"step":0,"tokens":0,"elapsed_s":0.9,"val_loss":10.84}`+"\n"+
		`{"step":1,"loss":10.83,"lr_scale":1,"grad_norm":0.72,"tokens":512,"tokens_per_s":480,"elapsed_s":2}`+"\n"), 0o644)

	s, err := view.New(runs)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ts := httptest.NewServer(s)
	defer ts.Close()
	get := func(path string, v any) {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			log.Fatal(err)
		}
	}

	var l view.Listing
	get("/api/runs", &l)
	for _, r := range l.Runs {
		// No lock holder and no checkpoint: a run that stopped early.
		fmt.Printf("%s: %s (%s), update %d, train loss %.2f\n", r.Name, r.Status, r.StatusDetail, r.Updates, *r.Loss)
	}
	var m view.Metrics
	get("/api/runs/opticks/metrics", &m)
	fmt.Printf("%d records, next from byte %d\n", len(m.Records), m.Offset)

	f, _ := os.OpenFile(metrics, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"step":2,"loss":10.77,"lr_scale":0.96,"grad_norm":0.73,"tokens":1024,"tokens_per_s":677,"elapsed_s":2.7}` + "\n")
	f.Close()
	get(fmt.Sprintf("/api/runs/opticks/metrics?from=%d&step=1", m.Offset), &m)
	fmt.Printf("%d new: %s\n", len(m.Records), m.Records[0])
	// Output:
	// opticks: interrupted (no checkpoint), update 1, train loss 10.83
	// 2 records, next from byte 155
	// 1 new: {"step":2,"loss":10.77,"lr_scale":0.96,"grad_norm":0.73,"tokens":1024,"tokens_per_s":677,"elapsed_s":2.7}
}
