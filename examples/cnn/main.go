// Command cnn trains a small convolutional classifier (autograd.Conv2D
// with ReLU and MaxPool2D, twice, then an nn.Linear head, AdamW from
// optim) on generated 12x12 images of a bar in one of four orientations
// (horizontal, vertical, and the two diagonals) at a random place over
// noise, and prints the loss and the accuracy on held-out images.
//
//	go run ./examples/cnn -steps 300
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

// size is the images' side; classes the bar orientations.
const (
	size    = 12
	classes = 4
)

// CNN is conv 3x3 (1 -> C1) ReLU maxpool 2, conv 3x3 (C1 -> C2) ReLU
// maxpool 2, and a linear head over the C2 x 3 x 3 features.
type CNN struct {
	Conv1W, Conv1B *tensor.Tensor
	Conv2W, Conv2B *tensor.Tensor
	Head           nn.Linear
}

// newCNN draws the weights from N(0, 2/fan-in) (He init, for ReLU), with
// zero biases.
func newCNN(init *nn.Init, c1, c2 int) *CNN {
	he := func(fanIn int) float64 { return math.Sqrt(2 / float64(fanIn)) }
	feat := c2 * (size / 4) * (size / 4)
	return &CNN{
		Conv1W: init.NormalStd(he(9), c1, 1, 3, 3), Conv1B: init.Zeros(c1),
		Conv2W: init.NormalStd(he(9*c1), c2, c1, 3, 3), Conv2B: init.Zeros(c2),
		Head: nn.Linear{Weight: init.NormalStd(he(feat), classes, feat), Bias: init.Zeros(classes)},
	}
}

// Forward maps images [N, 1, size, size] to class logits [N, classes].
func (m *CNN) Forward(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	same := autograd.ConvOptions{Padding: []int{1}}
	pool := autograd.PoolOptions{Kernel: []int{2}}
	h := g.MaxPool2D(g.Relu(g.Conv2D(x, m.Conv1W, m.Conv1B, same)), pool) // [N, C1, 6, 6]
	h = g.MaxPool2D(g.Relu(g.Conv2D(h, m.Conv2W, m.Conv2B, same)), pool)  // [N, C2, 3, 3]
	return m.Head.Forward(g, g.Reshape(h, x.Dim(0), -1))
}

// bars returns n images [n * size * size] and their labels: a bar of
// length 5 through a random centre, in orientation label (0 horizontal,
// 1 vertical, 2 down-right, 3 up-right), of brightness 1 over Gaussian
// noise of the given standard deviation.
func bars(rng *rand.Rand, n int, noise float64) (x []float32, labels []int32) {
	dirs := [classes][2]int{{0, 1}, {1, 0}, {1, 1}, {-1, 1}}
	x = make([]float32, n*size*size)
	for i := range n {
		img := x[i*size*size : (i+1)*size*size]
		for p := range img {
			img[p] = float32(noise * rng.NormFloat64())
		}
		c := rng.IntN(classes)
		r0, c0 := 2+rng.IntN(size-4), 2+rng.IntN(size-4)
		for s := -2; s <= 2; s++ {
			img[(r0+s*dirs[c][0])*size+c0+s*dirs[c][1]] += 1
		}
		labels = append(labels, int32(c))
	}
	return x, labels
}

// result is what a run measured.
type result struct {
	// FirstLoss and LastLoss are the training loss of the first and the
	// last minibatch; Accuracy is the accuracy on the held-out images.
	FirstLoss, LastLoss, Accuracy float64
}

type options struct {
	train, test, batch, steps int
	c1, c2                    int
	lr, noise                 float64
	seed                      uint64
	logEvery                  int
}

func main() {
	var o options
	flag.IntVar(&o.train, "train", 2048, "training images")
	flag.IntVar(&o.test, "test", 512, "held-out images")
	flag.IntVar(&o.batch, "batch", 32, "minibatch size")
	flag.IntVar(&o.steps, "steps", 300, "AdamW updates")
	flag.IntVar(&o.c1, "c1", 8, "channels of the first convolution")
	flag.IntVar(&o.c2, "c2", 16, "channels of the second convolution")
	flag.Float64Var(&o.lr, "lr", 1e-2, "AdamW learning rate")
	flag.Float64Var(&o.noise, "noise", 0.3, "pixel noise standard deviation")
	flag.Uint64Var(&o.seed, "seed", 1, "data and init seed")
	flag.IntVar(&o.logEvery, "log-every", 50, "print the loss every N updates")
	flag.Parse()
	r, err := run(cpu.New(), o)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("loss %.4f -> %.4f, held-out accuracy %.1f%% (chance %.0f%%)\n", r.FirstLoss, r.LastLoss, 100*r.Accuracy, 100.0/classes)
}

func run(dev device.Device, o options) (result, error) {
	if o.train <= 0 || o.test <= 0 || o.batch <= 0 || o.batch > o.train || o.steps <= 0 || o.c1 <= 0 || o.c2 <= 0 || !(o.lr > 0) || o.noise < 0 {
		return result{}, fmt.Errorf("cnn: train %d, test %d, batch %d, steps %d, c1 %d, c2 %d, lr %g, noise %g: want positive values, batch <= train and noise >= 0",
			o.train, o.test, o.batch, o.steps, o.c1, o.c2, o.lr, o.noise)
	}
	rng := rand.New(rand.NewPCG(o.seed, 2))
	trainX, trainY := bars(rng, o.train, o.noise)
	testX, testY := bars(rng, o.test, o.noise)
	init := nn.NewInit(dev, o.seed, 0)
	model := newCNN(init, o.c1, o.c2)
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
	defer g.Reset()
	var res result
	pixels := size * size
	for step := range o.steps {
		lo := (step * o.batch) % (o.train - o.batch + 1)
		x, err := tensor.FromFloat32(dev, trainX[lo*pixels:(lo+o.batch)*pixels], o.batch, 1, size, size)
		if err != nil {
			return res, err
		}
		y, err := tensor.FromInt32(dev, trainY[lo:lo+o.batch], o.batch)
		if err != nil {
			return res, err
		}
		g.Reset()
		tensor.ZeroGrad(params)
		loss := g.CrossEntropy(model.Forward(g, x), y)
		if err := g.Err(); err != nil {
			return res, err
		}
		l := float64(loss.Item())
		if step == 0 {
			res.FirstLoss = l
		}
		res.LastLoss = l
		if o.logEvery > 0 && step%o.logEvery == 0 {
			fmt.Printf("step %4d  loss %.4f\n", step, l)
		}
		if err := g.Backward(loss); err != nil {
			return res, err
		}
		if err := opt.Step(1); err != nil {
			return res, err
		}
	}
	x, err := tensor.FromFloat32(dev, testX, o.test, 1, size, size)
	if err != nil {
		return res, err
	}
	g.Reset()
	g.SetNoGrad(true)
	pred := g.ArgMaxAxis(model.Forward(g, x), 1, false)
	if err := g.Err(); err != nil {
		return res, err
	}
	right := 0
	for i, p := range pred.Int32s() {
		if p == testY[i] {
			right++
		}
	}
	res.Accuracy = float64(right) / float64(o.test)
	return res, nil
}
