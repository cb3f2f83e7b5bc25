package compose

import "github.com/hilbert-ml/hilbert/device"

// targetView reads targets[r] for dims [rows, 1, 1] (GatherAxis and
// ScatterAddAxis of one element per row).
func targetView(targets device.Buffer) device.View { return view(targets, 0, 1, 0, 0) }

// CrossEntropy is device.CrossEntropier's CrossEntropy on any backend.
func CrossEntropy(d device.Core, loss, lse, logits, targets device.Buffer, rows, vocab int) {
	if f, ok := d.(device.CrossEntropier); ok {
		f.CrossEntropy(loss, lse, logits, targets, rows, vocab)
		return
	}
	crossEntropy(d, "CrossEntropy", loss, lse, logits, targets, rows, vocab)
}

func crossEntropy(d device.Core, op string, loss, lse, logits, targets device.Buffer, rows, vocab int) {
	if rows == 0 {
		return
	}
	dt := logits.DType()
	dims := device.DimsOf(rows, vocab)
	mx := temp(d, op, dt, rows)
	e := temp(d, op, dt, rows*vocab)
	d.ReduceAxis(device.Max, mx, logits, rows, vocab, 1)
	d.BinaryStrided(device.Sub, dims, e, device.Contiguous(logits, dims), view(mx, 0, 1, 0))
	d.Unary(device.Exp, e, e)
	d.ReduceAxis(device.Sum, lse, e, rows, vocab, 1)
	d.Unary(device.Log, lse, lse)
	d.BinaryStrided(device.Add, device.DimsOf(rows), lse, flat(lse), flat(mx))
	d.GatherAxis(loss, logits, targetView(targets), rows, vocab, 1, 1)
	d.BinaryStrided(device.Sub, device.DimsOf(rows), loss, flat(lse), flat(loss))
	free(d, mx, e)
}

// CrossEntropyBackward is device.CrossEntropier's CrossEntropyBackward on
// any backend.
func CrossEntropyBackward(d device.Core, dlogits, dloss, logits, lse, targets device.Buffer, rows, vocab int) {
	if f, ok := d.(device.CrossEntropier); ok {
		f.CrossEntropyBackward(dlogits, dloss, logits, lse, targets, rows, vocab)
		return
	}
	crossEntropyBackward(d, "CrossEntropyBackward", dlogits, view(dloss, 0, 1, 0), logits, lse, targets, rows, vocab)
}

// crossEntropyBackward writes dloss * (softmax - onehot) with dloss read
// through a view of dims [rows, vocab] (a per-row vector or a scalar).
func crossEntropyBackward(d device.Core, op string, dlogits device.Buffer, dloss device.View, logits, lse, targets device.Buffer, rows, vocab int) {
	if rows == 0 {
		return
	}
	dims := device.DimsOf(rows, vocab)
	out := device.Contiguous(dlogits, dims)
	d.BinaryStrided(device.Sub, dims, dlogits, device.Contiguous(logits, dims), view(lse, 0, 1, 0))
	d.Unary(device.Exp, dlogits, dlogits)
	d.BinaryStrided(device.Mul, dims, dlogits, out, dloss)
	neg := temp(d, op, dlogits.DType(), rows)
	perRow := device.View{Buf: dloss.Buf} // dloss over [rows]
	perRow.Offset, perRow.Strides[0] = dloss.Offset, dloss.Strides[0]
	d.CopyStrided(device.DimsOf(rows), flat(neg), perRow)
	d.Unary(device.Neg, neg, neg)
	d.ScatterAddAxis(dlogits, neg, targetView(targets), rows, vocab, 1, 1)
	d.Free(neg)
}

// CrossEntropyWithGrad is device.CrossEntropier's CrossEntropyWithGrad on
// any backend.
func CrossEntropyWithGrad(d device.Core, loss, lse, logits, targets device.Buffer, rows, vocab int, gradScale float32) {
	if f, ok := d.(device.CrossEntropier); ok {
		f.CrossEntropyWithGrad(loss, lse, logits, targets, rows, vocab, gradScale)
		return
	}
	const op = "CrossEntropyWithGrad"
	crossEntropy(d, op, loss, lse, logits, targets, rows, vocab)
	s := scalar(d, op, logits.DType(), float64(gradScale))
	crossEntropyBackward(d, op, logits, bcast(s), logits, lse, targets, rows, vocab)
	d.Free(s)
}
