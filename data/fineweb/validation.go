package fineweb

import (
	"fmt"
	"io"

	"github.com/hilbert-ml/hilbert/tokenizer"
)

// ValLoader yields the validation sequences of one shard in order: sequence
// i is tokens[i*T : i*T+T+1], for the first nTokens/T sequences.
type ValLoader struct {
	shard *Shard
	T, B  int
	nSeq  int
	next  int
}

// Validation opens the validation shard at path for its first nTokens tokens
// (nTokens <= 0: the whole shard), read in micro-batches of B sequences of T
// tokens. The shard must hold nTokens+1 tokens (the last target).
func Validation(path string, nTokens, T, B int) (*ValLoader, error) {
	if T <= 0 || B <= 0 {
		return nil, fmt.Errorf("fineweb: validation %s: expected T > 0 and B > 0, got T=%d B=%d", path, T, B)
	}
	s, err := OpenShard(path, tokenizer.VocabSize)
	if err != nil {
		return nil, err
	}
	if nTokens <= 0 {
		nTokens = max(s.Len()-1, 0)
	}
	if s.Len() < nTokens+1 {
		s.Close()
		return nil, fmt.Errorf("fineweb: validation %s: token count: expected at least %d (nTokens+1), got %d", path, nTokens+1, s.Len())
	}
	return &ValLoader{shard: s, T: T, B: B, nSeq: nTokens / T}, nil
}

// Sequences returns the number of validation sequences.
func (v *ValLoader) Sequences() int { return v.nSeq }

// Next fills up to B sequences into inputs and targets (each at least B*T
// long, row after row) and returns how many it filled; after the last it
// returns 0, io.EOF.
func (v *ValLoader) Next(inputs, targets []int32) (int, error) {
	if len(inputs) < v.B*v.T || len(targets) < v.B*v.T {
		return 0, fmt.Errorf("fineweb: validation %s: next: expected inputs and targets of at least %d, got %d and %d", v.shard.path, v.B*v.T, len(inputs), len(targets))
	}
	if v.next >= v.nSeq {
		return 0, io.EOF
	}
	n := min(v.B, v.nSeq-v.next)
	toks := v.shard.tokens
	for b := 0; b < n; b++ {
		seq := toks[(v.next+b)*v.T : (v.next+b)*v.T+v.T+1]
		in, tg := inputs[b*v.T:(b+1)*v.T], targets[b*v.T:(b+1)*v.T]
		for i := 0; i < v.T; i++ {
			in[i] = int32(seq[i])
			tg[i] = int32(seq[i+1])
		}
	}
	v.next += n
	return n, nil
}

// Reset starts again from the first sequence.
func (v *ValLoader) Reset() { v.next = 0 }

// Close unmaps the shard.
func (v *ValLoader) Close() error { return v.shard.Close() }
