package models

import (
	"slices"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/nn"
)

// TestGPT2UntieHead: untying adds head.weight, a copy of tok.weight that
// is a tensor of its own, and untying twice is an error.
func TestGPT2UntieHead(t *testing.T) {
	cfg, _ := GPT2Preset("gpt2-tiny")
	m, err := NewGPT2(cpu.New(), cfg, 4)
	if err != nil {
		t.Fatal(err)
	}
	n := len(m.Parameters())
	if err := m.UntieHead(); err != nil {
		t.Fatal(err)
	}
	ps := m.Parameters()
	if len(ps) != n+1 || ps[len(ps)-1].Name != "head.weight" || len(nn.Tied(m)) != 0 {
		t.Fatalf("after UntieHead: %d parameters (want %d), last %s, tied %v", len(ps), n+1, ps[len(ps)-1].Name, nn.Tied(m))
	}
	if m.Head.Weight == m.Tok.Weight || !slices.Equal(m.Head.Weight.Float32s(), m.Tok.Weight.Float32s()) || !m.Head.Weight.RequiresGrad() {
		t.Errorf("the untied head is not a trainable copy of the embedding")
	}
	if err := m.UntieHead(); err == nil || !strings.Contains(err.Error(), "already untied") {
		t.Errorf("untying twice: %v", err)
	}
}
