package autograd

import (
	"math"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// A unary op is its kernel (a device.UnaryOp, computed by every backend's
// Unary) and its derivative here, in unaryRules: adding one is an entry
// there and the kernels.

// unaryRule is the gradient of y = op(x): dx from x, y and dy, in Graph
// ops, and which of x (in0) and y (output) it reads.
type unaryRule struct {
	reads slots
	dx    func(g *Graph, x, y, dy *tensor.Tensor) *tensor.Tensor
}

// unaryRules holds every device.UnaryOp's gradient, by op. The float32
// results are those of the buffer-level rules they replaced: the same
// operations in the same order. (It is set in init because the rules call
// Unary, which looks the table up.)
var unaryRules []unaryRule

// unaryNames names each op of unaryRules in errors, Unary(Op): made once,
// so that a forward call builds no string.
var unaryNames []string

func init() {
	unaryRules = unaryRuleTable()
	for op := range unaryRules {
		unaryNames = append(unaryNames, "Unary("+device.UnaryOp(op).String()+")")
	}
}

func unaryRuleTable() []unaryRule {
	return []unaryRule{
		device.Neg: {0, func(g *Graph, x, y, dy *tensor.Tensor) *tensor.Tensor { return g.Neg(dy) }},
		device.Abs: {in0, func(g *Graph, x, y, dy *tensor.Tensor) *tensor.Tensor {
			return g.Mul(dy, g.Unary(device.Sign, x))
		}},
		device.Exp: {output, func(g *Graph, x, y, dy *tensor.Tensor) *tensor.Tensor { return g.Mul(dy, y) }},
		device.Log: {in0, func(g *Graph, x, y, dy *tensor.Tensor) *tensor.Tensor { return g.Div(dy, x) }},
		device.Sqrt: {output, func(g *Graph, x, y, dy *tensor.Tensor) *tensor.Tensor {
			return g.Div(dy, g.Add(y, y))
		}},
		device.Rsqrt: {output, func(g *Graph, x, y, dy *tensor.Tensor) *tensor.Tensor { // -dy y^3 / 2
			return g.Mul(dy, g.Mul(g.Mul(g.Mul(y, y), y), g.Constant(-0.5, y.DType())))
		}},
		device.Reciprocal: {output, func(g *Graph, x, y, dy *tensor.Tensor) *tensor.Tensor {
			return g.Mul(dy, g.Neg(g.Unary(device.Square, y)))
		}},
		device.Tanh: {output, func(g *Graph, x, y, dy *tensor.Tensor) *tensor.Tensor {
			return g.Mul(dy, g.Sub(g.Constant(1, y.DType()), g.Unary(device.Square, y)))
		}},
		device.Erf: {in0, func(g *Graph, x, y, dy *tensor.Tensor) *tensor.Tensor { // dy 2/sqrt(pi) exp(-x^2)
			return g.Mul(dy, g.Mul(g.Exp(g.Neg(g.Unary(device.Square, x))), g.Constant(2/math.Sqrt(math.Pi), x.DType())))
		}},
		device.Sigmoid: {output, func(g *Graph, x, y, dy *tensor.Tensor) *tensor.Tensor {
			return g.Mul(dy, g.Mul(g.Sub(g.Constant(1, y.DType()), y), y))
		}},
		device.Relu: {in0, func(g *Graph, x, y, dy *tensor.Tensor) *tensor.Tensor {
			return g.Mul(dy, g.Compare(device.Gt, x, g.Constant(0, x.DType())))
		}},
		device.Sin: {in0, func(g *Graph, x, y, dy *tensor.Tensor) *tensor.Tensor {
			return g.Mul(dy, g.Unary(device.Cos, x))
		}},
		device.Cos: {in0, func(g *Graph, x, y, dy *tensor.Tensor) *tensor.Tensor {
			return g.Mul(dy, g.Neg(g.Unary(device.Sin, x)))
		}},
		device.Square: {in0, func(g *Graph, x, y, dy *tensor.Tensor) *tensor.Tensor { return g.Mul(dy, g.Add(x, x)) }},
		device.Sign:   {0, func(g *Graph, x, y, dy *tensor.Tensor) *tensor.Tensor { return g.zerosLike(x) }},
		device.Log1p: {in0, func(g *Graph, x, y, dy *tensor.Tensor) *tensor.Tensor {
			return g.Div(dy, g.Add(x, g.Constant(1, x.DType())))
		}},
		device.Expm1: {output, func(g *Graph, x, y, dy *tensor.Tensor) *tensor.Tensor {
			return g.Mul(dy, g.Add(y, g.Constant(1, y.DType())))
		}},
		device.Softplus: {in0, func(g *Graph, x, y, dy *tensor.Tensor) *tensor.Tensor { return g.Mul(dy, g.Sigmoid(x)) }},
	}
}

// unaryOp is a recorded Unary.
type unaryOp device.UnaryOp

func (u unaryOp) name() string      { return unaryNames[u] }
func (u unaryOp) reads(*node) slots { return unaryRules[u].reads }
func (u unaryOp) backward(g *Graph, n *node, dy *tensor.Tensor) {
	g.give(n.in[0], unaryRules[u].dx(g, n.in[0], n.out, dy))
}

// Unary returns op(x) elementwise, differentiable for every op but Sign
// (whose gradient is zero).
func (g *Graph) Unary(op device.UnaryOp, x *tensor.Tensor) *tensor.Tensor {
	if int(op) >= len(unaryRules) || unaryRules[op].dx == nil {
		return g.failf("Unary(%v): unknown op", op)
	}
	name := unaryNames[op]
	if !g.floatOK(name, x) {
		return nil
	}
	out := g.allocOf(name, x.DType(), x.Shape()...)
	if out == nil {
		return nil
	}
	g.dev.Unary(op, out.Buffer(), x.Buffer())
	return g.recorded(node{op: unaryOp(op), out: out, in: [3]*tensor.Tensor{x}})
}

// Neg returns -x.
func (g *Graph) Neg(x *tensor.Tensor) *tensor.Tensor { return g.Unary(device.Neg, x) }

// Exp returns e^x.
func (g *Graph) Exp(x *tensor.Tensor) *tensor.Tensor { return g.Unary(device.Exp, x) }

// Log returns the natural logarithm of x.
func (g *Graph) Log(x *tensor.Tensor) *tensor.Tensor { return g.Unary(device.Log, x) }

// Sqrt returns the square root of x.
func (g *Graph) Sqrt(x *tensor.Tensor) *tensor.Tensor { return g.Unary(device.Sqrt, x) }

// Tanh returns tanh(x).
func (g *Graph) Tanh(x *tensor.Tensor) *tensor.Tensor { return g.Unary(device.Tanh, x) }

// Sigmoid returns 1/(1+e^-x).
func (g *Graph) Sigmoid(x *tensor.Tensor) *tensor.Tensor { return g.Unary(device.Sigmoid, x) }

// Relu returns max(x, 0).
func (g *Graph) Relu(x *tensor.Tensor) *tensor.Tensor { return g.Unary(device.Relu, x) }

// Softplus returns log(1 + e^x), a smooth Relu (accurate for every x;
// PyTorch's softplus returns x itself above 20).
func (g *Graph) Softplus(x *tensor.Tensor) *tensor.Tensor { return g.Unary(device.Softplus, x) }

// GELU returns the exact Gaussian error linear unit x * (1 + erf(x/sqrt 2)) / 2,
// composed from Erf.
func (g *Graph) GELU(x *tensor.Tensor) *tensor.Tensor {
	if !g.floatOK("GELU", x) {
		return nil
	}
	e := g.Unary(device.Erf, g.Mul(x, g.Constant(1/math.Sqrt2, x.DType())))
	return g.Mul(g.Mul(x, g.Constant(0.5, x.DType())), g.Add(e, g.Constant(1, x.DType())))
}
