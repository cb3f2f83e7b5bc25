package smallbpe

import "fmt"

// Train learns vocab - 256 merges from texts: the texts are split into
// pieces (as Encode splits them), and the most frequent adjacent pair of
// tokens over all pieces, each occurrence counted (overlapping ones too), is
// merged everywhere, repeatedly; ties go to the pair with the smaller left,
// then right, token id. Pair counts are kept over the distinct pieces with
// their counts and updated only in the pieces a merge touches. It is an
// error when vocab is outside [256, MaxVocab] or the texts run out of
// pairs to merge first.
func Train(vocab int, texts ...string) (*BPE, error) {
	if vocab < ByteTokens || vocab > MaxVocab {
		return nil, fmt.Errorf("smallbpe: vocabulary %d: want %d <= V <= %d", vocab, ByteTokens, MaxVocab)
	}
	t := newTrainer(pieceCounts(texts))
	merges := make([]Pair, 0, vocab-ByteTokens)
	for m := int32(0); len(merges) < vocab-ByteTokens; m++ {
		best, n := t.best()
		if n == 0 {
			return nil, fmt.Errorf("smallbpe: the text has no pair left to merge after %d merges (vocabulary %d of %d)", len(merges), ByteTokens+len(merges), vocab)
		}
		merges = append(merges, best)
		t.merge(best, int32(ByteTokens)+m, m)
	}
	return New(merges)
}

// pieceCounts counts the texts' pieces of two bytes or more (a single
// byte has no pair).
func pieceCounts(texts []string) map[string]int64 {
	counts := make(map[string]int64)
	for _, text := range texts {
		for p := 0; p < len(text); {
			q := nextPiece(text, p)
			if q-p > 1 {
				counts[text[p:q]]++
			}
			p = q
		}
	}
	return counts
}

// word is a distinct piece as tokens, with its count.
type word struct {
	syms []int32
	n    int64
}

// trainer holds Train's pair counts over the distinct pieces.
type trainer struct {
	words []word
	pairs map[Pair]int64   // occurrences of each pair, counted over the texts
	where map[Pair][]int32 // the words a pair may occur in (a superset)
	seen  []int32          // per word, the last merge that visited it
}

func newTrainer(counts map[string]int64) *trainer {
	t := &trainer{words: make([]word, 0, len(counts)), pairs: make(map[Pair]int64), where: make(map[Pair][]int32)}
	for s, n := range counts {
		w := word{syms: make([]int32, len(s)), n: n}
		for i := 0; i < len(s); i++ {
			w.syms[i] = int32(s[i])
		}
		wi := int32(len(t.words))
		t.words = append(t.words, w)
		for i := 0; i+1 < len(w.syms); i++ {
			p := Pair{w.syms[i], w.syms[i+1]}
			t.pairs[p] += n
			t.note(p, wi)
		}
	}
	t.seen = make([]int32, len(t.words))
	for i := range t.seen {
		t.seen[i] = -1
	}
	return t
}

// note records that pair p occurs in word wi.
func (t *trainer) note(p Pair, wi int32) {
	if l := t.where[p]; len(l) == 0 || l[len(l)-1] != wi {
		t.where[p] = append(l, wi)
	}
}

// best returns the most frequent pair, ties to the smaller left then
// right id, and its count (0: none left).
func (t *trainer) best() (Pair, int64) {
	var best Pair
	var bestN int64
	for p, n := range t.pairs {
		if n > bestN || n == bestN && (p.Left < best.Left || p.Left == best.Left && p.Right < best.Right) {
			best, bestN = p, n
		}
	}
	return best, bestN
}

// merge replaces best by token id in every word that holds it (merge
// number m), updating the pair counts of those words only.
func (t *trainer) merge(best Pair, id, m int32) {
	for _, wi := range t.where[best] {
		if t.seen[wi] == m {
			continue
		}
		t.seen[wi] = m
		w := &t.words[wi]
		if !hasPair(w.syms, best) {
			continue
		}
		for i := 0; i+1 < len(w.syms); i++ {
			p := Pair{w.syms[i], w.syms[i+1]}
			if t.pairs[p] -= w.n; t.pairs[p] == 0 {
				delete(t.pairs, p)
			}
		}
		w.syms = mergeAll(w.syms, best, id, 0)
		for i := 0; i+1 < len(w.syms); i++ {
			p := Pair{w.syms[i], w.syms[i+1]}
			t.pairs[p] += w.n
			if p.Left == id || p.Right == id {
				t.note(p, wi)
			}
		}
	}
	delete(t.where, best)
}

func hasPair(w []int32, p Pair) bool {
	for i := 0; i+1 < len(w); i++ {
		if w[i] == p.Left && w[i+1] == p.Right {
			return true
		}
	}
	return false
}
