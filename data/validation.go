package data

import (
	"fmt"
	"io"

	"github.com/hilbert-ml/hilbert/tokenizer"
)

// ValLoader yields the validation sequences of one shard in order: sequence
// i is tokens[i*T : i*T+T+1], for the first nTokens/T sequences.
type ValLoader struct {
	shard     *Shard
	T, B      int
	nTokens   int
	requested int
	nSeq      int
	next      int
	toks      []uint16 // B*T+1 tokens of one micro-batch
}

// Validation opens the validation shard at path for its first nTokens tokens
// (nTokens <= 0: the whole shard), read in micro-batches of B sequences of T
// tokens. The last target is token nTokens, so a prefix of nTokens needs
// nTokens+1 tokens; a longer request is cut to the shard (Len()-1 tokens;
// Tokens and Cut report it). A shard of fewer than T+1 tokens is an error.
func Validation(path string, nTokens, T, B int) (*ValLoader, error) {
	if T <= 0 || B <= 0 {
		return nil, fmt.Errorf("data: validation %s: expected T > 0 and B > 0, got T=%d B=%d", path, T, B)
	}
	s, err := OpenShard(path, tokenizer.VocabSize)
	if err != nil {
		return nil, err
	}
	if err := verifyListed(s); err != nil {
		s.Close()
		return nil, err
	}
	have := s.Len()
	if have < T+1 {
		s.Close()
		return nil, fmt.Errorf("data: validation %s: token count: expected at least %d (T+1) for one sequence, got %d", path, T+1, have)
	}
	requested := nTokens
	if nTokens <= 0 || nTokens > have-1 {
		nTokens = have - 1
	}
	return &ValLoader{shard: s, T: T, B: B, nTokens: nTokens, requested: requested, nSeq: nTokens / T, toks: make([]uint16, B*T+1)}, nil
}

// Sum returns the whole validation shard's token count and checksum (not
// only the prefix's), computed as Validation read it in full.
func (v *ValLoader) Sum() ShardSum { return v.shard.Sum() }

// Verify checks that the validation shard did not change since it was
// opened (see Shard.Verify).
func (v *ValLoader) Verify() error { return v.shard.Verify() }

// Sequences returns the number of validation sequences.
func (v *ValLoader) Sequences() int { return v.nSeq }

// Tokens returns the length of the validation prefix: the nTokens asked
// for, or the shard's Len()-1 when that was less (see Cut).
func (v *ValLoader) Tokens() int { return v.nTokens }

// Cut reports whether a positive nTokens asked for more than the shard
// holds and the prefix was cut to it; a caller should say so.
func (v *ValLoader) Cut() bool { return v.requested > 0 && v.requested != v.nTokens }

// Next fills up to B sequences into inputs and targets (each at least B*T
// long, row after row) and returns how many it filled; after the last it
// returns 0, io.EOF. A shard truncated since Validation is an error.
func (v *ValLoader) Next(inputs, targets []int32) (int, error) {
	if len(inputs) < v.B*v.T || len(targets) < v.B*v.T {
		return 0, fmt.Errorf("data: validation %s: next: expected inputs and targets of at least %d, got %d and %d", v.shard.path, v.B*v.T, len(inputs), len(targets))
	}
	if v.next >= v.nSeq {
		return 0, io.EOF
	}
	n := min(v.B, v.nSeq-v.next)
	toks := v.toks[:n*v.T+1]
	if err := v.shard.ReadTokens(toks, v.next*v.T); err != nil {
		return 0, err
	}
	for b := 0; b < n; b++ {
		seq := toks[b*v.T : b*v.T+v.T+1]
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

// Close closes the shard.
func (v *ValLoader) Close() error { return v.shard.Close() }
