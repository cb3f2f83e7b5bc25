// Command spiral trains a small MLP classifier (nn.Linear with ReLU,
// softmax cross-entropy written with autograd ops, AdamW from optim) on
// the classic generated three-arm 2-D spiral, full batch, and prints the
// loss and the training accuracy.
//
//	go run ./examples/spiral -steps 300
package main

import (
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/tensor"
)

// MLP is the classifier: Linear, ReLU, Linear, ReLU, Linear.
type MLP struct {
	Layers []nn.Linear
}

// newMLP draws each weight from N(0, 2/in) (He init, for ReLU) with zero
// biases.
func newMLP(init *nn.Init, sizes ...int) *MLP {
	m := &MLP{}
	for i := 1; i < len(sizes); i++ {
		in, out := sizes[i-1], sizes[i]
		m.Layers = append(m.Layers, nn.Linear{Weight: init.NormalStd(math.Sqrt(2/float64(in)), out, in), Bias: init.Zeros(out)})
	}
	return m
}

// Forward maps points [N, 2] to class logits [N, classes].
func (m *MLP) Forward(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	for i := range m.Layers {
		x = m.Layers[i].Forward(g, x)
		if i < len(m.Layers)-1 {
			x = nn.ReLU.Forward(g, x)
		}
	}
	return x
}

// softmaxCrossEntropy is -mean_i log softmax(logits_i)[y_i], with the
// labels as a one-hot matrix [N, classes].
func softmaxCrossEntropy(g *autograd.Graph, logits, oneHot *tensor.Tensor) *tensor.Tensor {
	logp := g.LogSoftmax(logits, 1)
	return g.Scale(g.Sum(g.Mul(oneHot, logp)), -1/float64(logits.Dim(0)))
}

// spiral returns classes arms of n points each: point j of arm k at
// radius r = j/n and angle 4r + 2 pi k/classes plus noise; x is [N*2]
// row-major and labels [N].
func spiral(rng *rand.Rand, n, classes int, noise float64) (x []float32, labels []int) {
	for k := range classes {
		for j := range n {
			r := float64(j) / float64(n)
			a := 4*r + 2*math.Pi*float64(k)/float64(classes) + noise*rng.NormFloat64()
			x = append(x, float32(r*math.Cos(a)), float32(r*math.Sin(a)))
			labels = append(labels, k)
		}
	}
	return x, labels
}

// result is what a run measured.
type result struct {
	// FirstLoss and LastLoss are the loss before the first and after the
	// last update; Accuracy is the final training accuracy.
	FirstLoss, LastLoss, Accuracy float64
}

type options struct {
	points, classes, hidden, steps int
	lr                             float64
	seed                           uint64
	logEvery                       int
}

func main() {
	var o options
	flag.IntVar(&o.points, "points", 100, "points per arm")
	flag.IntVar(&o.classes, "classes", 3, "arms (classes)")
	flag.IntVar(&o.hidden, "hidden", 64, "hidden width")
	flag.IntVar(&o.steps, "steps", 300, "AdamW updates (full batch)")
	flag.Float64Var(&o.lr, "lr", 1e-2, "AdamW learning rate")
	flag.Uint64Var(&o.seed, "seed", 1, "data and init seed")
	flag.IntVar(&o.logEvery, "log-every", 50, "print the loss every N updates")
	flag.Parse()
	r, err := run(cpu.New(), o)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("loss %.4f -> %.4f, training accuracy %.1f%%\n", r.FirstLoss, r.LastLoss, 100*r.Accuracy)
}

func run(dev device.Device, o options) (result, error) {
	if o.points <= 0 || o.classes < 2 || o.hidden <= 0 || o.steps <= 0 || !(o.lr > 0) {
		return result{}, fmt.Errorf("spiral: points %d, classes %d, hidden %d, steps %d, lr %g: want positive values and at least 2 classes",
			o.points, o.classes, o.hidden, o.steps, o.lr)
	}
	rng := rand.New(rand.NewPCG(o.seed, 1))
	xs, labels := spiral(rng, o.points, o.classes, 0.2)
	n := len(labels)
	oneHot := make([]float32, n*o.classes)
	for i, y := range labels {
		oneHot[i*o.classes+y] = 1
	}
	x, err := tensor.FromFloat32(dev, xs, n, 2)
	if err != nil {
		return result{}, err
	}
	y, err := tensor.FromFloat32(dev, oneHot, n, o.classes)
	if err != nil {
		return result{}, err
	}
	init := nn.NewInit(dev, o.seed, 0)
	model := newMLP(init, 2, o.hidden, o.hidden, o.classes)
	if err := init.Err(); err != nil {
		return result{}, err
	}
	params := nn.Parameters(model)
	cfg := optim.PaperAdamW(o.lr)
	cfg.WeightDecay = 0
	opt, err := optim.NewAdamW(cfg, params)
	if err != nil {
		return result{}, err
	}
	g := autograd.New(dev)
	var res result
	for step := 0; step <= o.steps; step++ {
		g.Reset()
		tensor.ZeroGrad(params)
		logits := model.Forward(g, x)
		loss := softmaxCrossEntropy(g, logits, y)
		if err := g.Err(); err != nil {
			return res, err
		}
		l := float64(loss.Item())
		if step == 0 {
			res.FirstLoss = l
		}
		if o.logEvery > 0 && step%o.logEvery == 0 {
			fmt.Printf("step %4d  loss %.4f\n", step, l)
		}
		if step == o.steps { // the loss after the last update
			res.LastLoss = l
			res.Accuracy = accuracy(logits.Float32s(), labels, o.classes)
			break
		}
		if err := g.Backward(loss); err != nil {
			return res, err
		}
		if err := opt.Step(1); err != nil {
			return res, err
		}
	}
	g.Reset()
	return res, nil
}

// accuracy is the fraction of rows whose largest logit is the label's.
func accuracy(logits []float32, labels []int, classes int) float64 {
	right := 0
	for i, y := range labels {
		row := logits[i*classes : (i+1)*classes]
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		if best == y {
			right++
		}
	}
	return float64(right) / float64(len(labels))
}
