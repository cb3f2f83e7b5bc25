package tfevent

import (
	"bytes"
	"encoding/json"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestCRC32C checks the Castagnoli table against the CRC's published check
// value (CRC-32C of "123456789") and the mask against its definition.
func TestCRC32C(t *testing.T) {
	if got := crc32.Checksum([]byte("123456789"), castagnoli); got != 0xE3069283 {
		t.Fatalf("CRC-32C check value %#08x, want 0xe3069283", got)
	}
	c := uint32(0xE3069283)
	if got, want := maskedCRC([]byte("123456789")), ((c>>15)|(c<<17))+0xa282ead8; got != want {
		t.Fatalf("masked %#08x, want %#08x", got, want)
	}
}

// goldenEvents are the events scripts/tensorboard/read_events.py writes
// with Python's protobuf into testdata/python.tfevents.
var goldenEvents = []Event{
	{WallTime: 1700000000.25, FileVersion: FileVersion},
	{WallTime: 1700000001.5, Step: 1, Scalars: []Scalar{{"train/loss", 10.5}, {"perf/tokens", 4096}}},
	{WallTime: 1700000002.5, Step: 2, Scalars: []Scalar{{"train/loss", 9.75}, {"perf/tokens", 8192}}},
	{WallTime: 1700000300.5, Step: 300, Scalars: []Scalar{{"train/loss", 3.125}, {"perf/tokens", 1228800}}},
}

// TestPythonGolden decodes the file Python's protobuf wrote, and encodes
// the same events into the same bytes.
func TestPythonGolden(t *testing.T) {
	data, err := os.ReadFile("testdata/python.tfevents")
	if err != nil {
		t.Fatal(err)
	}
	events, n, err := Decode(data)
	if err != nil || n != len(data) {
		t.Fatalf("Decode: %d of %d bytes, %v", n, len(data), err)
	}
	if !reflect.DeepEqual(events, goldenEvents) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", events, goldenEvents)
	}
	var b []byte
	for _, e := range goldenEvents {
		b = AppendRecord(b, e.Marshal())
	}
	if !bytes.Equal(b, data) {
		t.Fatalf("Go's encoding differs from protobuf's:\n%x\n%x", b, data)
	}
}

func TestDecodeDamaged(t *testing.T) {
	var good []byte
	for _, e := range goldenEvents[:2] {
		good = AppendRecord(good, e.Marshal())
	}
	first := len(AppendRecord(nil, goldenEvents[0].Marshal()))
	flip := func(i int) []byte { b := bytes.Clone(good); b[i] ^= 1; return b }
	tests := []struct {
		name   string
		data   []byte
		events int
		torn   bool
		want   string
	}{
		{"whole", good, 2, false, ""},
		{"header cut", good[:first+5], 1, true, "12-byte header"},
		{"payload cut", good[:len(good)-3], 1, true, "cut short"},
		{"length CRC", flip(first + 9), 1, false, "length CRC"},
		{"length", flip(first), 1, false, "length CRC"},
		{"payload", flip(first + 14), 1, false, "data CRC"},
		{"data CRC", flip(len(good) - 1), 1, false, "data CRC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events, n, err := Decode(tt.data)
			if len(events) != tt.events {
				t.Errorf("%d events, want %d", len(events), tt.events)
			}
			if tt.want == "" {
				if err != nil || n != len(tt.data) {
					t.Errorf("n %d of %d, %v", n, len(tt.data), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || errors.Is(err, ErrTorn) != tt.torn {
				t.Errorf("error %v, want one naming %q (torn %v)", err, tt.want, tt.torn)
			}
			if n != first {
				t.Errorf("good bytes %d, want %d", n, first)
			}
		})
	}
}

// TestPythonReader has Python's protobuf decode a file Go wrote, checking
// every record's CRCs with a CRC-32C of its own.
func TestPythonReader(t *testing.T) {
	py, protoc := "/usr/bin/python3", "protoc"
	if _, err := os.Stat(py); err != nil {
		t.Skipf("skipped: no %s (install python3-protobuf and protobuf-compiler)", py)
	}
	if _, err := exec.LookPath(protoc); err != nil {
		t.Skip("skipped: no protoc on PATH (install protobuf-compiler)")
	}
	if err := exec.Command(py, "-c", "import google.protobuf").Run(); err != nil {
		t.Skipf("skipped: %s has no google.protobuf (install python3-protobuf): %v", py, err)
	}
	events := []Event{{WallTime: 1.7e9, FileVersion: FileVersion}}
	for step := int64(0); step <= 40; step += 4 {
		events = append(events, Event{
			WallTime: 1.7e9 + float64(step)*0.37, Step: step * 1e6,
			Scalars: []Scalar{{"train/loss", float32(10 / (1 + float64(step)))}, {"val/loss", -0.5}, {"perf/tokens_per_s", 3.4e38}, {"é", float32(math.SmallestNonzeroFloat32)}},
		})
	}
	var b []byte
	for _, e := range events {
		b = AppendRecord(b, e.Marshal())
	}
	path := filepath.Join(t.TempDir(), "events.out.tfevents.test")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, "../../scripts/tensorboard/read_events.py", "read", path).CombinedOutput()
	if err != nil {
		t.Fatalf("read_events.py: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(events) {
		t.Fatalf("Python read %d records, want %d:\n%s", len(lines), len(events), out)
	}
	for i, line := range lines {
		var rec struct {
			WallTime    float64 `json:"wall_time"`
			Step        int64   `json:"step"`
			FileVersion string  `json:"file_version"`
			Values      []struct {
				Tag   string  `json:"tag"`
				Value float64 `json:"simple_value"`
			} `json:"values"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, line)
		}
		got := Event{WallTime: rec.WallTime, Step: rec.Step, FileVersion: rec.FileVersion}
		for _, v := range rec.Values {
			got.Scalars = append(got.Scalars, Scalar{v.Tag, float32(v.Value)})
		}
		if !reflect.DeepEqual(got, events[i]) {
			t.Errorf("record %d: Python read %+v, Go wrote %+v", i, got, events[i])
		}
	}
}
