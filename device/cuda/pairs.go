package cuda

import "github.com/hilbert-ml/hilbert/device"

// pairThreads is the block size of h_pair_distance_max_f32 (its
// H_PAIR_THREADS).
const pairThreads = 256

// PairDistanceMax scans a Gram tile for each row's farthest column above
// the diagonal, one block per tile row, keeping the running maximum in best
// and its column in arg (geometry.PairDistanceMaxer).
func (d *Device) PairDistanceMax(best, arg, g, na, nb device.Buffer, rows, cols, r0, c0 int) {
	d.enter()
	defer d.leave()
	if !d.want("PairDistanceMax", f32Only, best, g, na, nb) || !d.want("PairDistanceMax", i32Only, arg) {
		return
	}
	if cols <= 0 {
		return
	}
	d.launchRows("h_pair_distance_max_f32", rows, pairThreads, ptrArg(best), ptrArg(arg), ptrArg(g), ptrArg(na), ptrArg(nb),
		i64arg(int64(rows)), i64arg(int64(cols)), i64arg(int64(r0)), i64arg(int64(c0)))
}
