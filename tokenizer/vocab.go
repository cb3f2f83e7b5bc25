package tokenizer

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"

	"github.com/pkoukk/tiktoken-go-loader/assets"
)

// R50KAsset is the name of the tiktoken rank file embedded by
// github.com/pkoukk/tiktoken-go-loader that holds GPT-2's merges.
const R50KAsset = "r50k_base.tiktoken"

// R50KSHA256 is the SHA-256 that tiktoken itself expects of r50k_base.tiktoken
// (tiktoken_ext/openai_public.py). The ranks are refused if they differ.
const R50KSHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"

// vocab holds the ranks in both directions.
type vocab struct {
	ranks   map[string]int32 // token bytes -> rank (= token id)
	byteTok [256]int32       // single byte -> token id
	decoder [][]byte         // token id -> bytes, VocabSize entries
}

// GPT2 returns the GPT-2 tokenizer (tiktoken's r50k_base). The ranks are
// parsed and checked once per process; the returned Tokenizer is shared and
// safe for concurrent use.
func GPT2() (*Tokenizer, error) { return gpt2Tokenizer() }

// gpt2Tokenizer is GPT2's work, done once.
var gpt2Tokenizer = sync.OnceValues(func() (*Tokenizer, error) {
	raw, err := assets.Assets.ReadFile(R50KAsset)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: reading embedded %s: %w", R50KAsset, err)
	}
	v, err := parseTiktoken(R50KAsset, raw, R50KSHA256)
	if err != nil {
		return nil, err
	}
	return &Tokenizer{v: v, specials: []special{{EndOfTextString, EndOfText}}}, nil
})

// parseTiktoken reads a .tiktoken file ("base64 rank" per line), checks its
// hash and that ranks run 0..n-1, and appends <|endoftext|> as rank n.
func parseTiktoken(name string, raw []byte, wantSHA string) (*vocab, error) {
	sum := sha256.Sum256(raw)
	if got := hex.EncodeToString(sum[:]); got != wantSHA {
		return nil, fmt.Errorf("tokenizer: %s: sha256: expected %s, got %s", name, wantSHA, got)
	}
	v := &vocab{ranks: make(map[string]int32, VocabSize)}
	v.decoder = make([][]byte, VocabSize)
	for i := range v.byteTok {
		v.byteTok[i] = -1
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	line := 0
	for sc.Scan() {
		line++
		f := bytes.Fields(sc.Bytes())
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("tokenizer: %s line %d: expected 2 fields, got %d", name, line, len(f))
		}
		tok, err := base64.StdEncoding.DecodeString(string(f[0]))
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %s line %d: token: %w", name, line, err)
		}
		r, err := strconv.Atoi(string(f[1]))
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %s line %d: rank: %w", name, line, err)
		}
		if r < 0 || r >= EndOfText || v.decoder[r] != nil {
			return nil, fmt.Errorf("tokenizer: %s line %d: rank: expected unique value in [0,%d), got %d", name, line, EndOfText, r)
		}
		v.ranks[string(tok)] = int32(r)
		v.decoder[r] = tok
		if len(tok) == 1 {
			v.byteTok[tok[0]] = int32(r)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", name, err)
	}
	if len(v.ranks) != EndOfText {
		return nil, fmt.Errorf("tokenizer: %s: rank count: expected %d, got %d", name, EndOfText, len(v.ranks))
	}
	for b, id := range v.byteTok {
		if id < 0 {
			return nil, fmt.Errorf("tokenizer: %s: byte 0x%02x has no rank", name, b)
		}
	}
	v.decoder[EndOfText] = []byte(EndOfTextString)
	return v, nil
}
