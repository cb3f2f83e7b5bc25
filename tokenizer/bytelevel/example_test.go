package bytelevel_test

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/tokenizer/bytelevel"
)

func Example() {
	toks := bytelevel.AppendDocument(nil, "Hi!")
	fmt.Println(toks, bytelevel.VocabSize)
	text, _ := bytelevel.Decode(toks[1:])
	fmt.Printf("%s\n", text)
	// Output:
	// [0 72 105 33] 256
	// Hi!
}
