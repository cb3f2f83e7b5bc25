package models

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/tensor"
)

// UntieHead gives the model a head of its own: a copy of the token
// embedding (the tied head's weight now), named head.weight among the
// Parameters, so an optimizer can update the two apart (RowNorm on the
// head). Called at initialisation it changes no output; a head already
// untied is an error.
func (m *GPT2) UntieHead() error {
	if m.Head.Weight != m.Tok.Weight {
		return fmt.Errorf("models: GPT2.UntieHead: the head is already untied")
	}
	if dt := m.Tok.Weight.DType(); dt != device.Float32 {
		return fmt.Errorf("models: GPT2.UntieHead: a %v embedding; untying copies float32 weights", dt)
	}
	w, err := tensor.FromFloat32(m.Tok.Weight.Device(), m.Tok.Weight.Float32s(), m.Tok.Weight.Shape()...)
	if err != nil {
		return fmt.Errorf("models: GPT2.UntieHead: %w", err)
	}
	w.SetRequiresGrad(true)
	m.Head.Weight = w
	m.params = nn.Parameters(m)
	return nil
}
