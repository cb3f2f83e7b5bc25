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
	counts := make(map[string]int64)
	for _, text := range texts {
		for p := 0; p < len(text); {
			q := nextPiece(text, p)
			if q-p > 1 { // a single byte has no pair
				counts[text[p:q]]++
			}
			p = q
		}
	}
	type word struct {
		syms []int32
		n    int64
	}
	words := make([]word, 0, len(counts))
	pairs := make(map[Pair]int64)
	where := make(map[Pair][]int32)
	for s, n := range counts {
		w := word{syms: make([]int32, len(s)), n: n}
		for i := 0; i < len(s); i++ {
			w.syms[i] = int32(s[i])
		}
		wi := int32(len(words))
		words = append(words, w)
		for i := 0; i+1 < len(w.syms); i++ {
			p := Pair{w.syms[i], w.syms[i+1]}
			pairs[p] += n
			if l := where[p]; len(l) == 0 || l[len(l)-1] != wi {
				where[p] = append(l, wi)
			}
		}
	}
	seen := make([]int32, len(words))
	for i := range seen {
		seen[i] = -1
	}
	merges := make([]Pair, 0, vocab-ByteTokens)
	for m := int32(0); len(merges) < vocab-ByteTokens; m++ {
		var best Pair
		var bestN int64
		for p, n := range pairs {
			if n > bestN || n == bestN && (p.Left < best.Left || p.Left == best.Left && p.Right < best.Right) {
				best, bestN = p, n
			}
		}
		if bestN == 0 {
			return nil, fmt.Errorf("smallbpe: the text has no pair left to merge after %d merges (vocabulary %d of %d)", len(merges), ByteTokens+len(merges), vocab)
		}
		merges = append(merges, best)
		id := int32(ByteTokens) + m
		for _, wi := range where[best] {
			if seen[wi] == m {
				continue
			}
			seen[wi] = m
			w := &words[wi]
			if !hasPair(w.syms, best) {
				continue
			}
			for i := 0; i+1 < len(w.syms); i++ {
				p := Pair{w.syms[i], w.syms[i+1]}
				if pairs[p] -= w.n; pairs[p] == 0 {
					delete(pairs, p)
				}
			}
			w.syms = mergeAll(w.syms, best, id, 0)
			for i := 0; i+1 < len(w.syms); i++ {
				p := Pair{w.syms[i], w.syms[i+1]}
				pairs[p] += w.n
				if p.Left == id || p.Right == id {
					if l := where[p]; len(l) == 0 || l[len(l)-1] != wi {
						where[p] = append(l, wi)
					}
				}
			}
		}
		delete(where, best)
	}
	return New(merges)
}

func hasPair(w []int32, p Pair) bool {
	for i := 0; i+1 < len(w); i++ {
		if w[i] == p.Left && w[i+1] == p.Right {
			return true
		}
	}
	return false
}
