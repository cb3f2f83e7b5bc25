package hf_test

import (
	"fmt"
	"os"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/models/hf"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/safetensors"
)

// Example loads a Hugging Face Llama directory (config.json and
// model.safetensors, here a tiny random one with grouped-query
// attention), continues a prompt greedily, and exports the model as BF16.
func Example() {
	dev := cpu.New()
	m, cfg, err := hf.Load(dev, "testdata/llama", hf.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	c := cfg.Model.(models.LlamaConfig)
	fmt.Printf("%s as the %q family: %d layers, %d heads over %d KV heads, %d parameters\n",
		cfg.Architecture, cfg.Family, c.Layers, c.Heads, c.KVHeads, nn.NumParams(m.Parameters()))
	out, err := models.Generate(dev, m, []int32{1, 2, 3}, models.GenerateOptions{Tokens: 8})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("greedy:", out)
	dir, _ := os.MkdirTemp("", "export")
	defer os.RemoveAll(dir)
	if err := hf.Save(dir, m, safetensors.BF16); err != nil {
		fmt.Println(err)
		return
	}
	_, back, err := hf.Load(dev, dir, hf.Options{})
	fmt.Println("exported as", back.Architecture, err)
	// Output:
	// LlamaForCausalLM as the "llama" family: 2 layers, 4 heads over 2 KV heads, 7504 parameters
	// greedy: [63 10 19 6 36 36 36 36]
	// exported as LlamaForCausalLM <nil>
}
