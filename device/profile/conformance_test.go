package profile_test

import (
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/devicetest"
	"github.com/hilbert-ml/hilbert/device/profile"
)

// TestConformanceThroughProfile runs the conformance suite through a
// recording wrapper of the CPU backend: the wrapper is transparent, and
// the core ops appear in its table.
func TestConformanceThroughProfile(t *testing.T) {
	p := profile.Wrap(cpu.New())
	p.Record(true)
	devicetest.Run(t, p)
	p.Record(false)
	seen := map[string]bool{}
	for _, o := range p.Ops() {
		seen[strings.SplitN(o.Name, "/", 2)[0]] = true
	}
	for _, name := range []string{"CopyStrided", "Unary", "BinaryStrided", "Where", "ReduceAxis", "GatherAxis", "ScatterAddAxis", "Random"} {
		if !seen[name] {
			t.Errorf("no %s recorded", name)
		}
	}
}
