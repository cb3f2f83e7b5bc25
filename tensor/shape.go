package tensor

import (
	"fmt"
	"strings"
)

// Shape is a tensor's dimensions.
type Shape []int

// Numel returns the number of elements of a shape (1 for rank 0).
func (s Shape) Numel() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// String formats a shape as [2 3 4].
func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// ShapeOf formats t's shape for an error message about an argument that
// may be missing: [2 3 4], or nil for a nil tensor.
func ShapeOf(t *Tensor) string {
	if t == nil {
		return "nil"
	}
	return t.Shape().String()
}

func checkShape(op string, shape []int) error {
	if len(shape) > MaxRank {
		return fmt.Errorf("tensor: %s: rank %d exceeds the maximum %d (shape %v)", op, len(shape), MaxRank, Shape(shape))
	}
	for _, d := range shape {
		if d < 0 {
			return fmt.Errorf("tensor: %s: negative dimension in shape %v", op, Shape(shape))
		}
	}
	return nil
}
