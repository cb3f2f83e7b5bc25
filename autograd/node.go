package autograd

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// opKind names a recorded operation.
type opKind uint8

const (
	opMatMul opKind = iota + 1
	opAdd
	opSub
	opMul
	opScale
	opSum
	opReshape
	opTranspose
	opEmbedding
	opRMSNorm
	opRoPE
	opSwiGLU
	opAttention
	opCrossEntropy
	opLinearCrossEntropy
)

// node is one recorded operation. It is a plain struct (no closures) so
// that recording a step allocates nothing once the node slice has grown.
type node struct {
	op  opKind
	out *tensor.Tensor
	// in are the differentiable inputs; saved are extra tensors kept for
	// the backward pass (owned by the graph).
	in    [3]*tensor.Tensor
	saved [3]*tensor.Tensor
	ints  [4]int
	f     float32
	flags [2]bool
	// lowp: a MatMul run under autocast; saved[0], saved[1] hold the
	// low-precision operands.
	lowp  bool
	shape device.AttentionShape
}

// backward dispatches one node's backward pass; gout is the gradient of
// n.out.
func (g *Graph) backward(n *node, gout *tensor.Tensor) {
	switch n.op {
	case opMatMul:
		g.matMulBackward(n, gout)
	case opAdd, opSub, opMul:
		g.binaryBackward(n, gout)
	case opScale:
		g.scaleBackward(n, gout)
	case opSum:
		g.sumBackward(n, gout)
	case opReshape:
		g.reshapeBackward(n, gout)
	case opTranspose:
		g.transposeBackward(n, gout)
	case opEmbedding:
		g.embeddingBackward(n, gout)
	case opRMSNorm:
		g.rmsNormBackward(n, gout)
	case opRoPE:
		g.ropeBackward(n, gout)
	case opSwiGLU:
		g.swiGLUBackward(n, gout)
	case opAttention:
		g.attentionBackward(n, gout)
	case opCrossEntropy:
		g.crossEntropyBackward(n, gout)
	case opLinearCrossEntropy:
		g.linearCrossEntropyBackward(n, gout)
	default:
		panic(fmt.Sprintf("autograd: no backward for op %d", n.op))
	}
}
