package tokenizer_test

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/tokenizer"
)

func ExampleTokenizer_Encode() {
	tok, err := tokenizer.GPT2()
	if err != nil {
		panic(err)
	}
	fmt.Println(tok.Encode("Hello world"))
	fmt.Println(tok.EncodeWithSpecial("Hi<|endoftext|>"))
	// Output:
	// [15496 995]
	// [17250 50256]
}

func ExampleTokenizer_Decode() {
	tok, _ := tokenizer.GPT2()
	text, err := tok.Decode([]int32{15496, 995})
	fmt.Printf("%q %v\n", text, err)
	// Output: "Hello world" <nil>
}
