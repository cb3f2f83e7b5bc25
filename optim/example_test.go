package optim_test

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/tensor"
)

// newParam makes a named parameter with a constant gradient, standing in
// for a model's parameter after a backward pass.
func newParam(name string, rows, cols int, g float32) *tensor.Tensor {
	dev := cpu.New()
	p, _ := tensor.New(dev, rows, cols)
	p.Name = name
	grad, _ := tensor.New(dev, rows, cols)
	dev.Fill(grad.Buffer(), g)
	p.SetGrad(grad)
	return p
}

// Build the paper's recipe over a model's parameters and run one update:
// clip the global gradient norm, take the schedule's multiplier, step.
func ExamplePaperRecipe() {
	params := []*tensor.Tensor{
		newParam("embed.weight", 10, 4, 0.1),
		newParam("blocks.0.attn.q.weight", 4, 4, 0.1),
		newParam("blocks.0.mlp.up.weight", 16, 4, 0.1),
		newParam("head.weight", 10, 4, 0.1),
	}
	set, err := optim.NewSet(optim.PaperRecipe(optim.PaperOptions{Head: optim.HeadRowNorm, Width: 512}), params)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, g := range set.Groups() {
		fmt.Printf("%s: %s over %d parameters\n", g.Name, g.Optimizer.Kind(), len(g.Optimizer.Params()))
	}
	sched, _ := optim.NewCosine(7083, 708)
	norm, err := optim.ClipGradNorm(set.Params(), 1.0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("gradient norm %.4f, scale(400) %.4f\n", norm, sched.Scale(400))
	if err := set.Step(sched.Scale(400)); err != nil {
		fmt.Println(err)
		return
	}
	head := params[3]
	fmt.Println("head step kept:", set.LastStep(head) != nil)
	// Output:
	// blocks: muon over 2 parameters
	// embed: adamw over 1 parameters
	// head: rownorm over 1 parameters
	// gradient norm 1.2649, scale(400) 0.5650
	// head step kept: true
}

// A tied head (the head is the embedding's tensor) is refused.
func ExampleNewSet_tiedHead() {
	embed := newParam("embed.weight", 10, 4, 0)
	head, _ := embed.Reshape(10, 4)
	head.Name = "head.weight"
	_, err := optim.NewSet(optim.PaperRecipe(optim.PaperOptions{}), []*tensor.Tensor{embed, head})
	fmt.Println(err)
	// Output:
	// optim: parameters embed.weight and head.weight share one buffer (tied weights are not supported)
}
