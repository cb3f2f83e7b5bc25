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
	opUnary
	opBroadcast
	opWhere
	opSumAxis
	opMaxAxis
	opCustom
	opPermute
	opSlice
	opIndexSelect
	opBroadcastTo
)

var opNames = [...]string{opMatMul: "MatMul", opAdd: "Add", opSub: "Sub", opMul: "Mul", opScale: "Scale",
	opSum: "Sum", opReshape: "Reshape", opTranspose: "Transpose", opEmbedding: "Embedding", opRMSNorm: "RMSNorm",
	opRoPE: "RoPE", opSwiGLU: "SwiGLU", opAttention: "Attention", opCrossEntropy: "CrossEntropy",
	opLinearCrossEntropy: "LinearCrossEntropy", opUnary: "Unary", opBroadcast: "binary op", opWhere: "Where",
	opSumAxis: "SumAxis", opMaxAxis: "MaxAxis", opCustom: "custom op", opPermute: "Permute", opSlice: "Slice",
	opIndexSelect: "IndexSelect", opBroadcastTo: "BroadcastTo"}

// String names the op as the Graph method that records it.
func (k opKind) String() string {
	if int(k) < len(opNames) && opNames[k] != "" {
		return opNames[k]
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

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
	f64   float64
	flags [2]bool
	// lowp: a MatMul run under autocast; saved[0], saved[1] hold the
	// low-precision operands.
	lowp  bool
	shape device.AttentionShape
	// versions are the versions at record time of savedTensors.
	versions [numSaved]uint64
}

// numSaved bounds savedTensors: in[0..2], saved[0..2] and out.
const numSaved = 7

// savedTensors returns the tensors n's backward pass reads, in slots
// in[0..2], saved[0..2], out (nil where it reads none): those whose
// in-place modification after the forward pass would corrupt the
// gradient. Graph-internal tensors (a norm's saved rstd, a loss's saved
// gradient blocks, autocast copies) are not listed: only this package
// writes them.
func (n *node) savedTensors() (s [numSaved]*tensor.Tensor) {
	switch n.op {
	case opMatMul:
		if !n.lowp {
			s[0], s[1] = n.in[0], n.in[1]
		}
	case opMul, opSwiGLU:
		s[0], s[1] = n.in[0], n.in[1]
	case opEmbedding:
		s[3] = n.saved[0] // ids
	case opRMSNorm:
		s[0] = n.in[0]
	case opRoPE:
		s[3], s[4] = n.saved[0], n.saved[1] // tables
	case opAttention:
		s[0], s[1], s[2], s[6] = n.in[0], n.in[1], n.in[2], n.out
	case opCrossEntropy:
		s[0], s[3] = n.in[0], n.saved[0] // logits, targets
	case opUnary:
		switch unaryReads(device.UnaryOp(n.ints[0])) {
		case readsInput:
			s[0] = n.in[0]
		case readsOutput:
			s[6] = n.out
		}
	case opMaxAxis:
		s[0], s[6] = n.in[0], n.out
	case opBroadcast:
		switch device.BinaryOp(n.ints[0]) {
		case device.Add, device.Sub: // the gradient is gout's alone
		case device.Div: // g / b and -g out / b
			s[1], s[6] = n.in[1], n.out
		case device.Pow:
			s[0], s[1], s[6] = n.in[0], n.in[1], n.out
		default: // Mul, Maximum, Minimum
			s[0], s[1] = n.in[0], n.in[1]
		}
	case opWhere:
		s[3] = n.saved[0] // cond
	case opIndexSelect:
		s[3] = n.saved[0] // ids
	case opCustom:
		s[6] = n.out // the inputs and saved tensors: checkCustomVersions
	}
	return s
}

// What a unary op's backward pass reads besides the upstream gradient.
const (
	readsNothing = iota
	readsInput
	readsOutput
)

// unaryReads returns which of x and y = op(x) unaryBackward reads for op.
func unaryReads(op device.UnaryOp) int {
	switch op {
	case device.Neg, device.Sign:
		return readsNothing
	case device.Exp, device.Sqrt, device.Rsqrt, device.Reciprocal, device.Tanh, device.Sigmoid, device.Expm1:
		return readsOutput
	}
	return readsInput // Abs, Log, Erf, Relu, Sin, Cos, Square, Log1p
}

// slotName names slot i of savedTensors in an error.
func (n *node) slotName(i int) string {
	switch {
	case i < 3:
		return fmt.Sprintf("input %d", i)
	case i < 6:
		return fmt.Sprintf("tensor %d", i-3)
	}
	return "its output"
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
	case opUnary:
		g.unaryBackward(n, gout)
	case opBroadcast:
		g.broadcastBackward(n, gout)
	case opWhere:
		g.whereBackward(n, gout)
	case opSumAxis:
		g.sumAxisBackward(n, gout)
	case opMaxAxis:
		g.maxAxisBackward(n, gout)
	case opCustom:
		g.customBackward(n, gout)
	case opPermute:
		g.permuteBackward(n, gout)
	case opSlice:
		g.sliceBackward(n, gout)
	case opIndexSelect:
		g.indexSelectBackward(n, gout)
	case opBroadcastTo:
		g.broadcastToBackward(n, gout)
	default:
		panic(fmt.Sprintf("autograd: no backward for op %d", n.op))
	}
}
