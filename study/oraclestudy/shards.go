package oraclestudy

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/hilbert-ml/hilbert/data"
	"github.com/hilbert-ml/hilbert/tokenizer/bytelevel"
	"github.com/hilbert-ml/hilbert/tokenizer/smallbpe"
)

// shards are a study's token shards.
type shards struct {
	train, val string
	nTrain     int
	tokenizer  string // in words, for the log and summary.md
}

// tokenShards reads the files' paragraphs, shuffles them with seed and
// writes token shards: the first valTokens tokens to validation, the rest
// to training. At vocab 256 the tokens are bytes (package bytelevel);
// above, a byte-level BPE of vocab tokens (package smallbpe) is trained on
// all the paragraphs first and its merges saved beside the shards.
func tokenShards(files []string, dir string, valTokens int, seed uint64, vocab int) (shards, error) {
	docs, err := paragraphs(files)
	if err != nil {
		return shards{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return shards{}, fmt.Errorf("oraclestudy: %w", err)
	}
	rng := rand.New(rand.NewPCG(seed, 0x6f7261636c65))
	rng.Shuffle(len(docs), func(i, j int) { docs[i], docs[j] = docs[j], docs[i] })
	appendDoc, prefix, unit := bytelevel.AppendDocument, "bytes", "bytes"
	desc := "byte-level tokens (V 256)"
	if vocab != bytelevel.VocabSize {
		bpe, err := smallbpe.Train(vocab, docs...)
		if err != nil {
			return shards{}, fmt.Errorf("oraclestudy: vocab %d: %w", vocab, err)
		}
		prefix, unit = fmt.Sprintf("bpe%d", vocab), "tokens"
		merges := filepath.Join(dir, prefix+".txt")
		if err := bpe.Save(merges); err != nil {
			return shards{}, err
		}
		appendDoc = bpe.Encoder()
		desc = fmt.Sprintf("byte-level BPE of V %d trained on the text (merges in %s)", vocab, merges)
	}
	var toks []int32
	n := 0
	for _, doc := range docs {
		toks = appendDoc(toks, doc)
		n += len(doc) + 1
	}
	if vocab != bytelevel.VocabSize {
		desc += fmt.Sprintf(", %.3f tokens per byte", float64(len(toks))/float64(n))
	}
	if len(toks) < 2*valTokens {
		return shards{}, fmt.Errorf("oraclestudy: %d %s of text: too few for %d validation %s and as many for training", len(toks), unit, valTokens, unit)
	}
	sh := shards{val: filepath.Join(dir, prefix+"_val_000000.bin"), train: filepath.Join(dir, prefix+"_train_000000.bin"),
		nTrain: len(toks) - valTokens, tokenizer: desc}
	if err := data.WriteShard(sh.val, toks[:valTokens], true); err != nil {
		return shards{}, err
	}
	if err := data.WriteShard(sh.train, toks[valTokens:], true); err != nil {
		return shards{}, err
	}
	return sh, nil
}

// paragraphs returns the files' non-blank, blank-line-separated
// paragraphs in order.
func paragraphs(files []string) ([]string, error) {
	var docs []string
	for _, p := range files {
		text, err := readText(p)
		if err != nil {
			return nil, err
		}
		for _, para := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n") {
			if strings.TrimSpace(para) != "" {
				docs = append(docs, para)
			}
		}
	}
	return docs, nil
}

// readText reads a text file as prepare and train -text do
// (data.OpenText: plain or gzip, a truncated gzip is an error).
func readText(path string) (string, error) {
	r, err := data.OpenText(path, nil)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("oraclestudy: %s: %w", path, err)
	}
	return string(b), nil
}
