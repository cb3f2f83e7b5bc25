package optim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/tensor"
)

// rownorm64 is the float64 reference RowNorm step (practical or projected).
func rownorm64(b []float64, rows, cols int, lr, eps, bc float64, projected bool) []float64 {
	a := make([]float64, len(b))
	for i := range b {
		a[i] = b[i] / bc
	}
	centre := func(x []float64) {
		for j := range cols {
			var s float64
			for i := range rows {
				s += x[i*cols+j]
			}
			for i := range rows {
				x[i*cols+j] -= s / float64(rows)
			}
		}
	}
	if projected {
		centre(a)
	}
	for i := range rows {
		var ss float64
		for j := range cols {
			ss += a[i*cols+j] * a[i*cols+j]
		}
		for j := range cols {
			a[i*cols+j] = -lr * a[i*cols+j] / (math.Sqrt(ss) + eps)
		}
	}
	if projected {
		centre(a)
	}
	return a
}

// Recipe test: lr 0.2, beta 0.6, eps 0.1, weight decay 0.3; the value
// after step 1 is the recipe's, step 2 is checked against float64.
func TestRowNormReference(t *testing.T) {
	w0 := []float64{1, 3, 2, -1, -4, 2, 5, -2}
	g1 := []float64{1, 2, 2, -1, -3, 4, 5, -2}
	g2 := []float64{-2, 3, 4, 2, 1, -5, 3, 1}
	want1 := []float64{0.8543860530060204, 2.6487721060120406, 1.7087721060120409, -0.8543860530060204,
		-3.6423529411764703, 1.7231372549019606, 4.517690072192669, -1.8070760288770678}
	w := param(t, "head.weight", w0, 4, 2)
	o, err := NewRowNorm(RowNormConfig{LR: 0.2, Beta: 0.6, Eps: 0.1, WeightDecay: 0.3, KeepStep: true}, []*tensor.Tensor{w})
	if err != nil {
		t.Fatal(err)
	}
	setGrad(t, w, g1)
	if err := o.Step(1); err != nil {
		t.Fatal(err)
	}
	// fp32 parameters: 2 ulp of values up to 5.
	near(t, "W after step 1", f64(w.Float32s()), want1, 1e-6, 0)

	b := make([]float64, 8)
	ref := append([]float64(nil), want1...)
	for i := range b {
		b[i] = 0.4 * g1[i]
		b[i] = 0.6*b[i] + 0.4*g2[i]
	}
	s := rownorm64(b, 4, 2, 0.2, 0.1, 1-0.36, false)
	for i := range ref {
		ref[i] = ref[i]*(1-0.2*0.3) + s[i]
	}
	setGrad(t, w, g2)
	if err := o.Step(1); err != nil {
		t.Fatal(err)
	}
	near(t, "W after step 2", f64(w.Float32s()), ref, 2e-6, 0)
	near(t, "S_2", f64(o.LastStep(w).Float32s()), s, 1e-6, 0)
}

// PRN of the centred G = [[1,2],[2,-1],[-3,-1]] (lr 1, beta 0 so B = G,
// eps 0): S = -PRN(G), and <G, -(1/2) PRN(G)> = -(1/2) sum ||g_i||.
func TestProjectedRowNormValues(t *testing.T) {
	g := []float64{1, 2, 2, -1, -3, -1}
	want := []float64{0.316227766017, 0.850765247839, 0.763441361517, -0.490875538661, -1.079669127534, -0.359889709178}
	w := param(t, "head.weight", make([]float64, 6), 3, 2)
	o, err := NewRowNorm(RowNormConfig{LR: 1, Beta: 0, Eps: 0, Projected: true, KeepStep: true}, []*tensor.Tensor{w})
	if err != nil {
		t.Fatal(err)
	}
	setGrad(t, w, g)
	if err := o.Step(1); err != nil {
		t.Fatal(err)
	}
	s := f64(o.LastStep(w).Float32s())
	prn := make([]float64, len(s))
	var inner float64
	for i := range s {
		prn[i] = -s[i]
		inner += g[i] * (-0.5 * prn[i])
	}
	near(t, "PRN(G)", prn, want, 5e-7, 0)
	near(t, "<G, -PRN(G)/2>", []float64{inner}, []float64{-3.81720680758398}, 2e-6, 0)
	half := -0.5 * (math.Sqrt(5) + math.Sqrt(5) + math.Sqrt(10))
	near(t, "-(1/2) sum ||g_i||", []float64{half}, []float64{-3.81720680758398}, 1e-13, 0)
}

// Both forms against float64 over three steps with random data.
func TestRowNormForms(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	rows, cols := 7, 5
	for _, projected := range []bool{false, true} {
		w0 := round32(randn(rng, rows*cols, 1))
		w := param(t, "head.weight", w0, rows, cols)
		cfg := PaperRowNorm(0.01)
		cfg.Projected, cfg.KeepStep = projected, true
		o, err := NewRowNorm(cfg, []*tensor.Tensor{w})
		if err != nil {
			t.Fatal(err)
		}
		ref := append([]float64(nil), w0...)
		b := make([]float64, rows*cols)
		for k, scale := range []float64{0.1, 1, 0.5} {
			g := round32(randn(rng, rows*cols, 1))
			setGrad(t, w, g)
			if err := o.Step(scale); err != nil {
				t.Fatal(err)
			}
			for i := range b {
				b[i] = 0.95*b[i] + 0.05*g[i]
			}
			s := rownorm64(b, rows, cols, 0.01*scale, 1e-8, 1-math.Pow(0.95, float64(k+1)), projected)
			for i := range ref {
				ref[i] += s[i]
			}
			near(t, "S_t", f64(o.LastStep(w).Float32s()), s, 1e-8, 1e-5)
			near(t, "W", f64(w.Float32s()), ref, 1e-6, 0)
		}
	}
}

// RowNorm's guarantee on the recipe's sharp example (k = 2): rows of G are
// the vertices of a centred equilateral triangle with unit edges. With
// eta = 1 the RowNorm step S = -(1/2) RN(G) decreases the linearised loss
// by Delta_RN = 0.8660254037844387; the best step of diameter 1 is
// S* = -G (D(G) = 1) with Delta* = 1, so the ratio is sqrt((k+1)/(2k)).
func TestRowNormSharpExample(t *testing.T) {
	r := 1 / math.Sqrt(3)
	var g []float64
	for k := range 3 {
		a := math.Pi/2 + 2*math.Pi*float64(k)/3
		g = append(g, r*math.Cos(a), r*math.Sin(a))
	}
	w := param(t, "head.weight", make([]float64, 6), 3, 2)
	o, err := NewRowNorm(RowNormConfig{LR: 0.5, Beta: 0, Eps: 0, KeepStep: true}, []*tensor.Tensor{w})
	if err != nil {
		t.Fatal(err)
	}
	setGrad(t, w, g)
	if err := o.Step(1); err != nil {
		t.Fatal(err)
	}
	s := f64(o.LastStep(w).Float32s())
	var dRN, dStar float64
	for i := range g {
		dRN -= g[i] * s[i]
		dStar += g[i] * g[i] // <G, -S*> with S* = -G
	}
	near(t, "Delta_RN", []float64{dRN}, []float64{0.8660254037844387}, 1e-6, 0)
	near(t, "Delta*", []float64{dStar}, []float64{1}, 1e-12, 0)
	near(t, "D(S*)", []float64{math.Hypot(g[0]-g[2], g[1]-g[3])}, []float64{1}, 1e-12, 0)
	near(t, "ratio", []float64{dRN / dStar}, []float64{math.Sqrt(3.0 / 4)}, 1e-6, 0)
	// No random step of diameter 1 does better than Delta* = 1.
	rng := rand.New(rand.NewPCG(11, 12))
	for range 2000 {
		x := randn(rng, 6, 1)
		d := max(math.Hypot(x[0]-x[2], x[1]-x[3]), math.Hypot(x[0]-x[4], x[1]-x[5]), math.Hypot(x[2]-x[4], x[3]-x[5]))
		var dec float64
		for i := range g {
			dec -= g[i] * x[i] / d
		}
		if dec > 1+1e-12 {
			t.Fatalf("a step of diameter 1 decreases by %v > Delta* = 1", dec)
		}
	}
}
