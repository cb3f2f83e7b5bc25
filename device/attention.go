package device

import "fmt"

// Attention whose keys and values are not the queries' sequence: q and out
// are [Batch, Seq, Heads, HeadDim], k and v [Batch, Keys(), KeyHeads(),
// HeadDim], lse [Batch, Heads, Seq].
//
// Under the causal mask (Unmasked false) the queries are the last Seq
// positions of a sequence of Keys() positions, as when a prefix's keys and
// values are cached: query t is at position t + Keys() - Seq and sees the
// keys up to it. Keys() = Seq is ordinary causal self-attention. Unmasked,
// every query sees every key (cross-attention, or a bidirectional
// encoder), and Keys() may be any positive length.

// Keys returns the length of k and v: KVSeq, or Seq when KVSeq is 0.
func (s AttentionShape) Keys() int {
	if s.KVSeq == 0 {
		return s.Seq
	}
	return s.KVSeq
}

// KeyHeads returns the number of heads of k and v: KVHeads, or Heads
// when KVHeads is 0.
func (s AttentionShape) KeyHeads() int {
	if s.KVHeads == 0 {
		return s.Heads
	}
	return s.KVHeads
}

// Grouped reports whether k and v have fewer heads than q (grouped-query
// attention).
func (s AttentionShape) Grouped() bool { return s.KeyHeads() != s.Heads }

// Visible returns how many keys query t sees: keys 0 .. Visible(t)-1.
func (s AttentionShape) Visible(t int) int {
	if s.Unmasked {
		return s.Keys()
	}
	return t + s.Keys() - s.Seq + 1
}

// Pairs returns the (query, key) pairs one (batch, head) computes: the sum
// of Visible over the queries.
func (s AttentionShape) Pairs() float64 {
	q, k := float64(s.Seq), float64(s.Keys())
	if s.Unmasked {
		return q * k
	}
	return q*(k-q) + q*(q+1)/2
}

// Check reports a shape the attention kernels do not take: a negative
// size, or a causal mask with fewer keys than queries (the first queries
// would see none). Queries without keys cannot be described (KVSeq 0 is
// Seq): a caller with an empty k refuses it.
func (s AttentionShape) Check() error {
	switch {
	case s.Batch < 0 || s.Seq < 0 || s.Heads < 0 || s.HeadDim < 0 || s.KVSeq < 0 || s.KVHeads < 0:
		return fmt.Errorf("attention shape %+v: negative size", s)
	case s.KVHeads > 0 && s.Heads%s.KVHeads != 0:
		return fmt.Errorf("attention shape %+v: %d key and value heads do not divide %d query heads", s, s.KVHeads, s.Heads)
	case !s.Unmasked && s.Keys() < s.Seq:
		return fmt.Errorf("attention shape %+v: causal attention over %d keys for %d queries (want at least as many keys: the queries are the last positions of the keys' sequence)", s, s.Keys(), s.Seq)
	}
	return nil
}
