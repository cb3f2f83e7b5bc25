package tokenizer

import "math"

// noRank marks a pair that is not in the vocabulary.
const noRank = math.MaxInt32

// smallPiece is the length up to which a piece is merged by the quadratic
// scan tiktoken uses; longer pieces go to the heap, O(n log n).
const smallPiece = 64

// merger holds scratch space for byte-pair merging; one per goroutine.
type merger struct {
	parts []part
	// heap merging
	next, prev []int32
	heap       []pairEntry
}

type part struct {
	start int32
	rank  int32 // rank of this part merged with the next one
}

type pairEntry struct {
	rank       int32
	start, end int32 // byte span of the merged pair
}

// appendPiece appends the tokens of one pre-tokenizer piece to dst.
func (v *vocab) appendPiece(m *merger, dst []int32, piece string) []int32 {
	if len(piece) == 1 {
		return append(dst, v.byteTok[piece[0]])
	}
	if id, ok := v.ranks[piece]; ok {
		return append(dst, id)
	}
	if len(piece) <= smallPiece {
		return v.mergeSmall(m, dst, piece)
	}
	return v.mergeHeap(m, dst, piece)
}

func (v *vocab) rank(s string) int32 {
	if id, ok := v.ranks[s]; ok {
		return id
	}
	return noRank
}

// mergeSmall is tiktoken's byte_pair_merge: repeatedly merge the leftmost
// pair of lowest rank.
func (v *vocab) mergeSmall(m *merger, dst []int32, piece string) []int32 {
	n := len(piece)
	parts := m.parts[:0]
	for i := 0; i < n-1; i++ {
		parts = append(parts, part{int32(i), v.rank(piece[i : i+2])})
	}
	parts = append(parts, part{int32(n - 1), noRank}, part{int32(n), noRank})
	rankAt := func(i int) int32 { // rank of parts[i] merged with parts[i+1] after parts[i+1] is removed
		if i+3 < len(parts) {
			return v.rank(piece[parts[i].start:parts[i+3].start])
		}
		return noRank
	}
	for {
		best, bi := int32(noRank), -1
		for i := 0; i < len(parts)-1; i++ {
			if parts[i].rank < best {
				best, bi = parts[i].rank, i
			}
		}
		if bi < 0 {
			break
		}
		parts[bi].rank = rankAt(bi)
		if bi > 0 {
			parts[bi-1].rank = rankAt(bi - 1)
		}
		parts = append(parts[:bi+1], parts[bi+2:]...)
	}
	for i := 0; i+1 < len(parts); i++ {
		dst = append(dst, v.ranks[piece[parts[i].start:parts[i+1].start]])
	}
	m.parts = parts[:0]
	return dst
}

// mergeHeap gives the same result as mergeSmall in O(n log n): the candidate
// pairs sit in a min-heap ordered by (rank, start), parts in a linked list
// indexed by their start byte; entries made stale by a merge are skipped when
// popped.
func (v *vocab) mergeHeap(m *merger, dst []int32, piece string) []int32 {
	n := int32(len(piece))
	if cap(m.next) < int(n)+1 {
		m.next = make([]int32, n+1)
		m.prev = make([]int32, n+1)
	}
	next, prev := m.next[:n+1], m.prev[:n+1]
	for i := int32(0); i <= n; i++ {
		next[i], prev[i] = i+1, i-1
	}
	h := m.heap[:0]
	for i := int32(0); i+1 < n; i++ {
		if r := v.rank(piece[i : i+2]); r != noRank {
			h = append(h, pairEntry{r, i, i + 2})
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	for len(h) > 0 {
		e := h[0]
		last := len(h) - 1
		h[0] = h[last]
		h = h[:last]
		siftDown(h, 0)
		// Valid only if e.start still begins a part whose successor ends at e.end.
		if prev[e.start] == -2 {
			continue
		}
		mid := next[e.start]
		if mid >= n || next[mid] != e.end {
			continue
		}
		// Merge: the part at e.start absorbs the part at mid.
		next[e.start] = e.end
		if e.end <= n {
			prev[e.end] = e.start
		}
		prev[mid] = -2
		if p := prev[e.start]; p >= 0 {
			if r := v.rank(piece[p:e.end]); r != noRank {
				h = pushEntry(h, pairEntry{r, p, e.end})
			}
		}
		if e.end < n {
			if r := v.rank(piece[e.start:next[e.end]]); r != noRank {
				h = pushEntry(h, pairEntry{r, e.start, next[e.end]})
			}
		}
	}
	m.heap = h[:0]
	for i := int32(0); i < n; i = next[i] {
		dst = append(dst, v.ranks[piece[i:next[i]]])
	}
	return dst
}

func less(a, b pairEntry) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.start < b.start)
}

func siftDown(h []pairEntry, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && less(h[r], h[l]) {
			c = r
		}
		if !less(h[c], h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

func pushEntry(h []pairEntry, e pairEntry) []pairEntry {
	h = append(h, e)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !less(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}
