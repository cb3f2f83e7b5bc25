package oraclestudy

import (
	"fmt"
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
	train, val   string
	nTrain, nVal int
	tokenizer    string // in words, for the log and summary.md
	// valToks are the validation shard's tokens and tokenBytes a token's
	// length in bytes of text (NUL, the end of text, counts one), for the
	// validation loss per byte.
	valToks    []int32
	tokenBytes func(int32) int
}

// tokenShards reads the files' paragraphs, shuffles them with seed and
// writes token shards. Without valFiles the first valTokens tokens go to
// validation and the rest to training; with valFiles every paragraph of
// files goes to training and the validation is the whole of valFiles (its
// paragraphs in order). At vocab 256 the tokens are bytes (package
// bytelevel); above, a byte-level BPE of vocab tokens (package smallbpe)
// is trained first, on all the paragraphs without valFiles and on the
// training paragraphs only with them, and its merges saved beside the
// shards.
func tokenShards(files, valFiles []string, dir string, valTokens int, seed uint64, vocab int) (shards, error) {
	docs, err := paragraphs(files)
	if err != nil {
		return shards{}, err
	}
	valDocs, err := paragraphs(valFiles)
	if err != nil {
		return shards{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return shards{}, fmt.Errorf("oraclestudy: %w", err)
	}
	rng := rand.New(rand.NewPCG(seed, 0x6f7261636c65))
	rng.Shuffle(len(docs), func(i, j int) { docs[i], docs[j] = docs[j], docs[i] })
	appendDoc, prefix, unit := bytelevel.AppendDocument, "bytes", "bytes"
	tokenBytes := func(int32) int { return 1 }
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
		tokenBytes = func(t int32) int { return len(bpe.TokenBytes(t)) }
		on := "the text"
		if len(valFiles) > 0 {
			on = "the training text"
		}
		desc = fmt.Sprintf("byte-level BPE of V %d trained on %s (merges in %s)", vocab, on, merges)
	}
	var toks, valToks []int32
	n := 0
	for _, doc := range docs {
		toks = appendDoc(toks, doc)
		n += len(doc) + 1
	}
	for _, doc := range valDocs {
		valToks = appendDoc(valToks, doc)
	}
	if vocab != bytelevel.VocabSize {
		desc += fmt.Sprintf(", %.3f tokens per byte", float64(len(toks))/float64(n))
	}
	if len(valFiles) == 0 {
		if len(toks) < 2*valTokens {
			return shards{}, fmt.Errorf("oraclestudy: %d %s of text: too few for %d validation %s and as many for training", len(toks), unit, valTokens, unit)
		}
		toks, valToks = toks[valTokens:], toks[:valTokens]
	}
	sh := shards{val: filepath.Join(dir, prefix+"_val_000000.bin"), train: filepath.Join(dir, prefix+"_train_000000.bin"),
		nTrain: len(toks), nVal: len(valToks), tokenizer: desc, valToks: valToks, tokenBytes: tokenBytes}
	if err := data.WriteShard(sh.val, valToks, true); err != nil {
		return shards{}, err
	}
	if err := data.WriteShard(sh.train, toks, true); err != nil {
		return shards{}, err
	}
	return sh, nil
}

// valBytes returns the bytes of text of the validation targets that a
// validation of n tokens in sequences of seqLen scores: tokens 1 ...
// (n / seqLen) seqLen of the shard (the first token of each sequence is
// only an input, and so is the shard's first).
func (sh shards) valBytes(n, seqLen int) (targets, bytes int) {
	targets = (min(n, len(sh.valToks)-1) / seqLen) * seqLen
	for _, t := range sh.valToks[1 : 1+targets] {
		bytes += sh.tokenBytes(t)
	}
	return targets, bytes
}

// paragraphs returns the files' non-blank, blank-line-separated
// paragraphs in order.
func paragraphs(files []string) ([]string, error) {
	var docs []string
	for _, p := range files {
		text, err := data.ReadText(p)
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
