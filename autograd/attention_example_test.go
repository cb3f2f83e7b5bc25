package autograd_test

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// Queries of zeros score every key alike, so each output is the mean of
// the values the query sees. Attention with three keys and two queries
// puts the queries at positions 1 and 2 of the keys' sequence (a prefix of
// one cached position): the first sees values 1, 2 and the second all
// three. CrossAttention lets both see all three.
func ExampleGraph_CrossAttention() {
	dev := cpu.New()
	q, _ := tensor.FromFloat32(dev, []float32{0, 0}, 1, 2, 1, 1)       // [batch, queries, heads, headDim]
	k, _ := tensor.FromFloat32(dev, []float32{0.3, -1, 2}, 1, 3, 1, 1) // [batch, keys, heads, headDim]
	v, _ := tensor.FromFloat32(dev, []float32{1, 2, 3}, 1, 3, 1, 1)

	g := autograd.New(dev)
	causal := g.Attention(q, k, v, 1)
	cross := g.CrossAttention(q, k, v, 1)
	if err := g.Err(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(causal.Float32s(), cross.Float32s())
	// Output: [1.5 2] [2 2]
}
