package oracle

import (
	"sync"
	"sync/atomic"
)

// Pairs of rows i < j, and the blocks of rows that the solver's workers
// take in parallel (forBlocks).

// pairs returns v(v-1)/2.
func pairs(v int) int { return v * (v - 1) / 2 }

// pairIndex is the position of pair (i, j), i < j, in row-major order of
// the strict upper triangle: row i's pairs are contiguous.
func pairIndex(i, j, v int) int { return i*(2*v-i-1)/2 + (j - i - 1) }

// rowBlocks splits rows [0, v) into at most n contiguous blocks holding
// about equal numbers of pairs (row i holds v-1-i).
func rowBlocks(v, n int) [][2]int {
	total := pairs(v)
	n = max(1, min(n, v))
	var out [][2]int
	lo, acc := 0, 0
	for i := 0; i < v; i++ {
		acc += v - 1 - i
		if len(out) < n-1 && acc*n >= total*(len(out)+1) {
			out = append(out, [2]int{lo, i + 1})
			lo = i + 1
		}
	}
	if lo < v {
		out = append(out, [2]int{lo, v})
	}
	return out
}

// forBlocks runs body(worker, lo, hi) over the row blocks on threads
// goroutines, handing blocks out in order.
func forBlocks(blocks [][2]int, threads int, body func(w, lo, hi int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < threads; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				b := int(next.Add(1)) - 1
				if b >= len(blocks) {
					return
				}
				body(w, blocks[b][0], blocks[b][1])
			}
		}(w)
	}
	wg.Wait()
}

// rowBlocksEven splits [0, v) into at most n blocks of equal size.
func rowBlocksEven(v, n int) [][2]int {
	n = max(1, min(n, v))
	var out [][2]int
	for k := 0; k < n; k++ {
		lo, hi := k*v/n, (k+1)*v/n
		if hi > lo {
			out = append(out, [2]int{lo, hi})
		}
	}
	return out
}
