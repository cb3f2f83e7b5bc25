package smallbpe_test

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/tokenizer/smallbpe"
)

func Example() {
	b, err := smallbpe.Train(259, "ab ab ab abc")
	if err != nil {
		fmt.Println(err)
		return
	}
	toks := b.Encode(" abc ab")
	text, _ := b.Decode(toks)
	fmt.Println(b.VocabSize(), b.Merges(), toks)
	fmt.Printf("%q\n", text)
	// Output:
	// 259 [{97 98} {32 256} {257 99}] [258 257]
	// " abc ab"
}
