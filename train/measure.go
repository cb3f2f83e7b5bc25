package train

// The trainer's measurements after an update: the validation loss, the
// head step's exact row diameter D(S_t) and its Hilbert RMS over the
// panel of validation hidden states.

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/optim/geometry"
	"github.com/hilbert-ml/hilbert/tensor"
)

// measure adds the diagnostics and the validation due after the update
// of r (every one after the last), and writes r to the metrics and the
// history when a line is due.
func (t *Trainer) measure(r *Record, last bool) error {
	// The diagnostics of the step every rank took alike: once, on the rank
	// that writes them.
	if (last || t.step%t.cfg.DiagEvery == 0) && t.rank == 0 {
		if err := t.diagnoseStep(r); err != nil {
			return err
		}
	}
	if last || t.step%t.cfg.ValEvery == 0 {
		if err := t.validate(r); err != nil {
			return err
		}
	}
	if last || t.step%t.cfg.LogEvery == 0 || r.ValLoss != nil || r.Diameter != nil {
		if err := t.metrics.Write(*r); err != nil {
			return err
		}
		t.history = append(t.history, *r)
	}
	return nil
}

// headStep copies the head's last step S_t to the host (nil for a tied
// head, or before the first step).
func (t *Trainer) headStep() []float32 {
	if s := t.headStepTensor(); s != nil {
		return s.Float32s()
	}
	return nil
}

// headStepTensor returns the head's last step S_t on its device (nil for
// a tied head, or before the first step).
func (t *Trainer) headStepTensor() *tensor.Tensor {
	if t.model.head == nil {
		return nil
	}
	return t.opt.LastStep(t.model.head)
}

// float32Step returns the head step s as float32, as the diagnostics
// take it: s itself, or for a float64 run a float32 copy (the diagnostics
// are measurements, well within float32's precision), with the function
// that releases the copy.
func float32Step(s *tensor.Tensor) (*tensor.Tensor, func(), error) {
	if s.DType() == device.Float32 {
		return s, func() {}, nil
	}
	c, err := tensor.NewPooled(s.Device(), device.Float32, s.Shape()...)
	if err != nil {
		return nil, nil, err
	}
	if err := c.SetFloat32(s.Float32s()); err != nil {
		c.Release()
		return nil, nil, err
	}
	return c, c.Release, nil
}

// diagnoseStep computes the exact row diameter of the head step on the
// device that holds it (no host copy of the V x d step).
func (t *Trainer) diagnoseStep(r *Record) error {
	s := t.headStepTensor()
	if s == nil {
		return nil
	}
	s, release, err := float32Step(s)
	if err != nil {
		return fmt.Errorf("train: update %d: diameter: %w", r.Step, err)
	}
	defer release()
	d, err := geometry.RowDiameterDevice(s.Buffer(), t.model.vocab, t.model.dim)
	if err != nil {
		return fmt.Errorf("train: update %d: diameter: %w", r.Step, err)
	}
	r.Diameter = &d.D
	lr := t.opt.PeakLR("head") * r.LRScale
	r.LR = &lr
	return nil
}

// validate computes the mean token cross-entropy over the validation
// prefix, and the Hilbert RMS of the head step over the panel.
func (t *Trainer) validate(r *Record) error {
	t.val.Reset()
	var panel []float32
	d := t.model.dim
	seqIndex := 0
	hook := &panelHook{
		want: func() bool { return seqIndex < t.cfg.PanelSeqs },
		take: func(n int, hidden *tensor.Tensor) {
			h := hidden.Float32s()
			for s := 0; s < n && seqIndex < t.cfg.PanelSeqs; s++ {
				row := s * t.cfg.SeqLen * d
				panel = append(panel, h[row:row+t.cfg.PanelPositions*d]...)
				seqIndex++
			}
		},
	}
	if t.model.head == nil {
		hook = nil // a tied head: no step of its own to measure
	}
	v, _, err := validationPass(t.g, t.model.lm, t.val,
		validationBuffers{hostIn: t.hostIn, hostTgt: t.hostTgt, in: t.inputs, tgt: t.targets}, hook)
	if err != nil {
		return fmt.Errorf("train: validation: %w", err)
	}
	if err := finiteMetric("validation loss", v, r.Step); err != nil {
		return err // on every rank alike, before anything is written
	}
	r.ValLoss = &v
	if s := t.headStepTensor(); s != nil && len(panel) > 0 {
		// The panel goes to the step's device; two values per position
		// come back.
		n := len(panel) / d
		h, err := tensor.NewPooled(t.dev, device.Float32, n, d)
		if err != nil {
			return fmt.Errorf("train: Hilbert RMS: %w", err)
		}
		if err := h.SetFloat32(panel); err != nil {
			h.Release()
			return fmt.Errorf("train: Hilbert RMS: %w", err)
		}
		s32, release, err := float32Step(s)
		if err != nil {
			h.Release()
			return fmt.Errorf("train: Hilbert RMS: %w", err)
		}
		rms, err := geometry.HilbertRMSDevice(s32.Buffer(), t.model.vocab, d, h.Buffer(), n)
		release()
		h.Release()
		if err != nil {
			return fmt.Errorf("train: Hilbert RMS: %w", err)
		}
		r.HilbertRMS = &rms
	}
	return nil
}
