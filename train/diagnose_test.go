package train

import (
	"context"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/optim/geometry"
)

// The diameter the trainer logs (computed on the step's device) is the
// host RowDiameter of the same step, for both heads.
func TestDiagnosedDiameterMatchesHost(t *testing.T) {
	shards, val := writeTinyShards(t, t.TempDir())
	for _, head := range []string{"rownorm", "adamw"} {
		cfg := tinyConfig(t, t.TempDir(), shards, val)
		cfg.Head, cfg.Steps, cfg.DiagEvery, cfg.ValEvery, cfg.CheckpointEvery = head, 4, 2, 100, 0
		tr, err := New(cpu.New(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		err = tr.Run(context.Background(), func(tr *Trainer, r Record) error {
			if r.Diameter == nil {
				return nil
			}
			host, err := geometry.RowDiameter(cpu.New(), tr.headStep(), cfg.Model.Vocab, cfg.Model.Dim)
			if err != nil {
				return err
			}
			if *r.Diameter != host.D || host.D <= 0 {
				t.Errorf("%s update %d: logged D = %v, host RowDiameter %v", head, r.Step, *r.Diameter, host.D)
			}
			checked++
			return nil
		})
		tr.Close()
		if err != nil {
			t.Fatal(err)
		}
		if checked != 2 {
			t.Errorf("%s: %d diameters checked, want 2", head, checked)
		}
	}
}
