package data

// permutation returns a permutation of 0..n-1 drawn from (seed, a, b) by a
// Fisher-Yates shuffle over splitmix64. It is written out here, not taken
// from math/rand, so that the order can never change with the Go version: a
// resumed run must see the batches it would have seen.
func permutation(n int, seed, a, b uint64) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	s := seed ^ 0x9e3779b97f4a7c15*(a+1) ^ 0xbf58476d1ce4e5b9*(b+1)
	for i := n - 1; i > 0; i-- {
		j := int(bounded(&s, uint64(i+1)))
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// splitmix64 advances s and returns the next value.
func splitmix64(s *uint64) uint64 {
	*s += 0x9e3779b97f4a7c15
	z := *s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// bounded returns a uniform value in [0, n) by rejection sampling.
func bounded(s *uint64, n uint64) uint64 {
	limit := -n % n // 2^64 mod n
	for {
		v := splitmix64(s)
		if v >= limit {
			return v % n
		}
	}
}
