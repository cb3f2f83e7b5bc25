package nn

import (
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
)

// TestInitDType checks that a float64 Init draws the float32 Init's
// numbers unrounded, fills ones in float64, and refuses other dtypes.
func TestInitDType(t *testing.T) {
	dev := cpu.New()
	a, b := NewInit(dev, 7, 0.02), NewInit(dev, 7, 0.02)
	b.DType = device.Float64
	wa, wb := a.Normal(3, 4), b.Normal(3, 4)
	ob := b.Ones(2)
	if a.Err() != nil || b.Err() != nil {
		t.Fatalf("init: %v, %v", a.Err(), b.Err())
	}
	if wb.DType() != device.Float64 || ob.DType() != device.Float64 {
		t.Fatalf("dtypes %v, %v, want float64", wb.DType(), ob.DType())
	}
	fa, fb := wa.Float32s(), wb.Float64s()
	for i := range fa {
		if fa[i] != float32(fb[i]) {
			t.Fatalf("element %d: float32 %v, float64 %v", i, fa[i], fb[i])
		}
	}
	if o := ob.Float64s(); o[0] != 1 || o[1] != 1 {
		t.Fatalf("Ones in float64 = %v", o)
	}
	c := NewInit(dev, 1, 0.02)
	c.DType = device.Int32
	if c.Zeros(2) != nil || c.Err() == nil || !strings.Contains(c.Err().Error(), "Init.DType") {
		t.Fatalf("int32 Init: err %v, want one naming Init.DType", c.Err())
	}
}
