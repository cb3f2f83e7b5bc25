package train

import (
	"errors"
	"fmt"
	"io"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/data"
	"github.com/hilbert-ml/hilbert/tensor"
)

// ValidationLoss returns the mean token cross-entropy of m over every
// sequence of v, weighted by tokens and computed on g without gradients
// (under g's autocast), with the tokens it covered: what the trainer logs
// as val_loss. blockRows bounds the fused head's row blocks of the
// paper's transformer (0: the default; other models take their own).
// v is read from its current position to its end.
func ValidationLoss(g *autograd.Graph, m LanguageModel, v *data.ValLoader, blockRows int) (float64, int, error) {
	return validationPass(g, WithBlockRows(m, blockRows), v, validationBuffers{}, nil)
}

// validationBuffers are one full micro-batch's host and device buffers
// that a caller reuses from pass to pass; missing ones are allocated.
type validationBuffers struct {
	hostIn, hostTgt []int32
	in, tgt         *tensor.Tensor
}

// panelHook collects final hidden states during a validation pass: want
// is asked before each micro-batch, and take gets that micro-batch's rows
// sequences of hidden states after its forward pass when want said yes.
type panelHook struct {
	want func() bool
	take func(rows int, hidden *tensor.Tensor)
}

// validationPass runs m over v's micro-batches (see ValidationLoss),
// handing panel the hidden states where m is a PanelModel.
func validationPass(g *autograd.Graph, m LanguageModel, v *data.ValLoader, buf validationBuffers, panel *panelHook) (float64, int, error) {
	seqLen, micro := v.T, v.B
	if len(buf.hostIn) < micro*seqLen || len(buf.hostTgt) < micro*seqLen {
		buf.hostIn, buf.hostTgt = make([]int32, micro*seqLen), make([]int32, micro*seqLen)
	}
	noGrad := g.NoGrad()
	g.Reset()
	g.SetNoGrad(true)
	defer func() {
		g.Reset()
		g.SetNoGrad(noGrad)
	}()
	var sum float64
	var count int
	for {
		rows, err := v.Next(buf.hostIn, buf.hostTgt)
		if errors.Is(err, io.EOF) || (err == nil && rows == 0) {
			break
		}
		if err != nil {
			return 0, 0, err
		}
		k := rows * seqLen
		loss, err := validationBatch(g, m, buf, rows, seqLen, micro, panel)
		if err != nil {
			return 0, 0, err
		}
		sum += loss * float64(k)
		count += k
	}
	if count == 0 {
		return 0, 0, fmt.Errorf("no validation sequences")
	}
	return sum / float64(count), count, nil
}

// validationBatch runs one micro-batch of rows sequences from buf's host
// buffers and returns its mean loss. The tensors of a short last batch (or
// of every batch, when buf has none) are allocated and released here.
func validationBatch(g *autograd.Graph, m LanguageModel, buf validationBuffers, rows, seqLen, micro int, panel *panelHook) (float64, error) {
	k := rows * seqLen
	in, tgt := buf.in, buf.tgt
	if rows < micro || in == nil || tgt == nil {
		var err error
		if in, err = tensor.FromInt32(g.Device(), buf.hostIn[:k], rows, seqLen); err != nil {
			return 0, err
		}
		defer in.Release()
		if tgt, err = tensor.FromInt32(g.Device(), buf.hostTgt[:k], rows, seqLen); err != nil {
			return 0, err
		}
		defer tgt.Release()
	} else {
		in.SetInt32(buf.hostIn)
		tgt.SetInt32(buf.hostTgt)
	}
	g.Reset()
	defer g.Reset() // before the deferred releases: the graph may hold views of in and tgt
	pm, hasHidden := m.(PanelModel)
	wantHidden := hasHidden && panel != nil && panel.want()
	var loss, hidden *tensor.Tensor
	if wantHidden {
		loss, hidden = pm.LossHidden(g, in, tgt)
	} else {
		loss = m.Loss(g, in, tgt)
	}
	if err := g.Err(); err != nil {
		return 0, err
	}
	if loss == nil || loss.Len() != 1 {
		return 0, errors.New("the model's loss is not a scalar")
	}
	if wantHidden && hidden != nil {
		panel.take(rows, hidden)
	}
	return loss.Item64(), nil
}
