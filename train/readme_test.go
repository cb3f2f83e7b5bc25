package train

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeQuotesExampleLoop: the train.Loop snippet of
// docs/writing-a-model.md (moved there from the README) is
// ExampleLoop as compiled and run by go test, word for word, so that it
// declares every name it uses and checks every error.
func TestReadmeQuotesExampleLoop(t *testing.T) {
	readme, err := os.ReadFile("../docs/writing-a-model.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("loop_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- ExampleLoop, quoted from train/loop_example_test.go (TestReadmeQuotesExampleLoop) -->\n```go\n"
	_, rest, ok := strings.Cut(string(readme), marker)
	if !ok {
		t.Fatal("docs/writing-a-model.md lacks the ExampleLoop quote's marker")
	}
	quote, _, ok := strings.Cut(rest, "```\n")
	if !ok {
		t.Fatal("docs/writing-a-model.md: the ExampleLoop quote is not closed")
	}
	_, fn, _ := strings.Cut(string(src), "\nfunc ExampleLoop() {")
	fn = "func ExampleLoop() {" + fn[:strings.Index(fn, "\n}\n")+3]
	if quote != fn {
		t.Errorf("docs/writing-a-model.md's ExampleLoop quote differs from train/loop_example_test.go's ExampleLoop: copy the function into the page")
	}
}
