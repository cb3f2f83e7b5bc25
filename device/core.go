package device

import "fmt"

// MaxDims is the largest number of axes a strided core op iterates over.
const MaxDims = 6

// Dims is the shape a strided core op iterates over: Rank axes of sizes
// N[0], ..., N[Rank-1], row-major (the last axis varies fastest). Rank 0
// is a single element. Entries past Rank are ignored.
type Dims struct {
	Rank int
	N    [MaxDims]int
}

// DimsOf returns the Dims of a shape. It panics when the shape has more
// than MaxDims axes or a negative size.
func DimsOf(shape ...int) Dims {
	if len(shape) > MaxDims {
		panic(fmt.Sprintf("device: shape %v has more than %d axes", shape, MaxDims))
	}
	var d Dims
	d.Rank = len(shape)
	for i, n := range shape {
		if n < 0 {
			panic(fmt.Sprintf("device: negative size in shape %v", shape))
		}
		d.N[i] = n
	}
	return d
}

// Numel returns the number of elements (1 for rank 0).
func (d Dims) Numel() int {
	n := 1
	for _, v := range d.N[:d.Rank] {
		n *= v
	}
	return n
}

// Shape returns the sizes as a slice.
func (d Dims) Shape() []int { return append([]int(nil), d.N[:d.Rank]...) }

// String formats the dims as [2 3 4].
func (d Dims) String() string { return fmt.Sprint(d.N[:d.Rank]) }

// RowMajor returns the layout of a contiguous row-major array of these
// dims starting at element 0.
func (d Dims) RowMajor() Layout {
	var l Layout
	s := 1
	for i := d.Rank - 1; i >= 0; i-- {
		l.Strides[i] = s
		s *= d.N[i]
	}
	return l
}

// Layout places the elements of one operand of a strided op in its
// buffer: the element at index (i_0, ..., i_{r-1}) of the op's Dims is
// element Offset + i_0*Strides[0] + ... + i_{r-1}*Strides[r-1] of the
// buffer. A stride of 0 repeats the element along that axis, which is how
// NumPy broadcasting is expressed; strides may be negative. Every element
// the op reaches must lie inside the buffer.
type Layout struct {
	Offset  int
	Strides [MaxDims]int
}

// View is a buffer read or written through a Layout.
type View struct {
	Buf Buffer
	Layout
}

// Contiguous returns the view of buf as a row-major array of dims
// starting at element 0.
func Contiguous(buf Buffer, dims Dims) View { return View{Buf: buf, Layout: dims.RowMajor()} }

// Broadcast returns the view of buf, a row-major array of shape (whose
// rank is at most dims.Rank), broadcast to dims by NumPy's rules: shape is
// aligned with the trailing axes of dims, and its axes of size 1 (and the
// missing leading ones) get stride 0. ok is false when the shapes do not
// broadcast.
func Broadcast(buf Buffer, shape []int, dims Dims) (v View, ok bool) {
	r := len(shape)
	if r > dims.Rank {
		return View{}, false
	}
	v.Buf = buf
	s := 1
	for i := r - 1; i >= 0; i-- {
		j := dims.Rank - r + i
		switch shape[i] {
		case dims.N[j]:
			if shape[i] != 1 {
				v.Strides[j] = s
			}
		case 1:
		default:
			return View{}, false
		}
		s *= shape[i]
	}
	return v, true
}

// BroadcastShapes returns the NumPy broadcast of two shapes, or ok false.
func BroadcastShapes(a, b []int) (out []int, ok bool) {
	r := max(len(a), len(b))
	out = make([]int, r)
	for i := range r {
		x, y := 1, 1
		if k := i - (r - len(a)); k >= 0 {
			x = a[k]
		}
		if k := i - (r - len(b)); k >= 0 {
			y = b[k]
		}
		switch {
		case x == y || y == 1:
			out[i] = x
		case x == 1:
			out[i] = y
		default:
			return nil, false
		}
	}
	return out, true
}

// UnaryOp selects an elementwise function of one operand (Device.Unary).
type UnaryOp uint8

const (
	// Neg is -x.
	Neg UnaryOp = iota + 1
	// Abs is |x|.
	Abs
	// Exp is e^x.
	Exp
	// Log is the natural logarithm (NaN below 0, -Inf at 0).
	Log
	// Sqrt is the square root (NaN below 0).
	Sqrt
	// Rsqrt is 1/sqrt(x).
	Rsqrt
	// Reciprocal is 1/x.
	Reciprocal
	// Tanh is the hyperbolic tangent.
	Tanh
	// Erf is the error function.
	Erf
	// Sigmoid is 1/(1+e^-x).
	Sigmoid
	// Relu is max(x, 0); NaN stays NaN.
	Relu
	// Sin is the sine.
	Sin
	// Cos is the cosine.
	Cos
	// Square is x*x.
	Square
	// Sign is -1 below 0 and 1 above; ±0 and NaN are returned as they are.
	Sign
	// Log1p is log(1+x), accurate near 0.
	Log1p
	// Expm1 is e^x - 1, accurate near 0.
	Expm1
	// Softplus is log(1 + e^x), computed as max(x, 0) + log1p(e^-|x|)
	// (accurate for every x; PyTorch returns x itself above 20).
	Softplus

	numUnaryOps = Softplus
)

// UnaryOps lists every UnaryOp, for tests and tables.
func UnaryOps() []UnaryOp {
	ops := make([]UnaryOp, 0, numUnaryOps)
	for op := Neg; op <= numUnaryOps; op++ {
		ops = append(ops, op)
	}
	return ops
}

var unaryNames = [...]string{Neg: "neg", Abs: "abs", Exp: "exp", Log: "log", Sqrt: "sqrt", Rsqrt: "rsqrt",
	Reciprocal: "reciprocal", Tanh: "tanh", Erf: "erf", Sigmoid: "sigmoid", Relu: "relu", Sin: "sin",
	Cos: "cos", Square: "square", Sign: "sign", Log1p: "log1p", Expm1: "expm1", Softplus: "softplus"}

// Valid reports whether op is one of UnaryOps.
func (op UnaryOp) Valid() bool { return op >= Neg && op <= numUnaryOps }

// String names the operation.
func (op UnaryOp) String() string { return enumName(op, unaryNames[:], "unary") }

// BinaryOps lists every BinaryOp, for tests and tables.
func BinaryOps() []BinaryOp {
	ops := make([]BinaryOp, 0, numBinaryOps)
	for op := Add; op <= numBinaryOps; op++ {
		ops = append(ops, op)
	}
	return ops
}

// IsComparison reports whether op yields a 0/1 mask.
func (op BinaryOp) IsComparison() bool { return op >= Eq && op <= Ge }

// Distribution selects what Device.Random draws.
type Distribution uint8

const (
	// Uniform draws from [a, b) (the rounding of a + (b-a)u can reach b).
	Uniform Distribution = iota + 1
	// Normal draws from the normal distribution of mean a and standard
	// deviation b.
	Normal
	// Bernoulli draws 1 with probability a and 0 otherwise.
	Bernoulli
)

var distributionNames = [...]string{Uniform: "uniform", Normal: "normal", Bernoulli: "bernoulli"}

// String names the distribution.
func (d Distribution) String() string { return enumName(d, distributionNames[:], "distribution") }

// MaxOperands is the most operands (outputs and inputs) a Plan holds.
const MaxOperands = 4

// Plan is the iteration space of a strided op after simplification: axes
// of size 1 are dropped and adjacent axes that every operand walks as one
// (stride[i] == stride[i+1]*N[i+1]) are merged, so that contiguous
// operands give a plan of rank 1 and a broadcast row gives rank 2. A
// backend iterates over Dims and reads operand k at Layouts[k]; the plan
// visits the same elements in the same row-major order as the original
// dims. Rank is at least 1 (a single element is N = [1]).
type Plan struct {
	Dims
	Operands int
	Layouts  [MaxOperands]Layout
}

// NewPlan simplifies dims for the operands' layouts (at most MaxOperands).
func NewPlan(dims Dims, layouts ...Layout) Plan {
	if len(layouts) > MaxOperands {
		panic("device: NewPlan of more than MaxOperands operands")
	}
	p := Plan{Operands: len(layouts)}
	for k, l := range layouts {
		p.Layouts[k].Offset = l.Offset
	}
	for i := 0; i < dims.Rank; i++ {
		n := dims.N[i]
		if n == 0 {
			p.Rank, p.N[0] = 1, 0
			for k := range p.Layouts {
				p.Layouts[k].Strides = [MaxDims]int{}
			}
			return p
		}
		if n == 1 {
			continue
		}
		if r := p.Rank; r > 0 {
			merge := true
			for k, l := range layouts {
				if p.Layouts[k].Strides[r-1] != l.Strides[i]*n {
					merge = false
					break
				}
			}
			if merge {
				p.N[r-1] *= n
				for k, l := range layouts {
					p.Layouts[k].Strides[r-1] = l.Strides[i]
				}
				continue
			}
		}
		r := p.Rank
		p.N[r] = n
		for k, l := range layouts {
			p.Layouts[k].Strides[r] = l.Strides[i]
		}
		p.Rank++
	}
	if p.Rank == 0 {
		p.Rank, p.N[0] = 1, 1
	}
	return p
}

// Inner returns the size of the plan's last axis and the number of rows
// (the product of the other axes).
func (p *Plan) Inner() (rows, inner int) {
	inner = p.N[p.Rank-1]
	rows = 1
	for _, n := range p.N[:p.Rank-1] {
		rows *= n
	}
	return rows, inner
}

// RowOffsets returns operand k's element offset of the start of row r
// (rows as Inner counts them).
func (p *Plan) RowOffsets(r int) (off [MaxOperands]int) {
	for k := range p.Operands {
		off[k] = p.Layouts[k].Offset
	}
	for d := p.Rank - 2; d >= 0; d-- {
		c := r % p.N[d]
		r /= p.N[d]
		for k := range p.Operands {
			off[k] += c * p.Layouts[k].Strides[d]
		}
	}
	return off
}
