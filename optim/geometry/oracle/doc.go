// Package oracle computes the exact diameter-constrained decrease of an
// LM-head gradient, the quantity the paper's RowNorm guarantee compares
// against and calls impractical to compute.
//
// For a head gradient G (V x d, rows g_i, centred so that 1^T G = 0) the
// steepest decrease under a row-diameter budget is
//
//	min { <G, S> : D(S) <= eta, 1^T S = 0 } = -eta T(G),
//
//	T(G) = max { <G, Phi> : ||phi_i - phi_j||_2 <= 1 for all i < j, 1^T Phi = 0 }   (potentials)
//	     = min { sum_{i<j} ||y_ij||_2 : sum_{j != i} y_ij = g_i for every i }       (flows, y_ji = -y_ij)
//
// and RowNorm's step -(eta/2) RN(G) decreases the loss to first order by
// Delta_RN = (eta/2) sum_i ||g_i||, with
//
//	sqrt((k+1)/(2k)) <= Delta_RN / Delta_* = (1/2) sum_i ||g_i|| / T(G) <= 1,   k = rank(G).
//
// Solve returns both sides, so every answer carries its own certificate:
// a potential Phi that is exactly feasible (its largest pair distance,
// computed exactly over all pairs, is at most 1), whose value <G, Phi> is
// a lower bound on T(G), and a flow Y that balances G exactly (up to
// float64 rounding), whose cost sum ||y_ij|| is an upper bound. Weak
// duality gives <G, Phi> = <Y, K Phi> <= sum ||y_ij|| ||phi_i - phi_j|| <=
// sum ||y_ij|| for any such pair, so the relative gap (U - L) / U bounds
// the error of either.
//
// # Method
//
// With K the edge-incidence operator of the complete graph on the V
// tokens, (K Phi)_ij = phi_i - phi_j and (K^T Y)_i = sum_{j != i} y_ij, the
// problem is the saddle point
//
//	min_Y max_Phi <G - K^T Y, Phi> + sum_{i<j} ||y_ij||,
//
// solved by the primal-dual hybrid gradient method (Chambolle-Pock) in
// float64:
//
//	Phi+ = Phi + tau (G - K^T Y)
//	Y+   = shrink_sigma(Y + sigma K (2 Phi+ - Phi)),   shrink_s(z) = z max(0, 1 - s/||z||)
//
// (the prox of sigma times the flow norm is block soft-thresholding; its
// conjugate is the projection of the pair differences onto unit balls).
// K^T K is the Laplacian of the complete graph, V I - 11^T, so ||K||^2 = V
// and the steps satisfy tau sigma = 0.99^2 / V. Their ratio omega = sigma /
// tau (the primal weight) is adapted as PDLP does: the iterate is checked
// every Options.CheckEvery updates, restarts follow PDLP's sufficient,
// necessary and artificial criteria on the certified gap, and at each
// restart log omega moves halfway to log(||dY|| / ||dPhi||) over the last
// restart period. The start is RowNorm's own certificate pair: phi_i =
// g_i / (2 ||g_i||) (diameter <= 1, value (1/2) sum ||g_i||) and the
// uniform flow y_ij = (g_i - g_j) / V (balanced, because K^T K G = V G for
// centred G).
//
// The certificates are made exact in closed form. The lower bound takes
// the current potentials, repairs the few violated pair constraints by
// pairwise projections (moving the row with the smaller gradient more),
// and divides them by their largest pair distance (float64, by direct
// subtraction, over every pair that can exceed 1 - margin, or over all
// pairs when a row moved by margin/2); without the repair one violated
// pair would scale the whole potential down. The upper bound projects Y
// onto the balance constraints: with r = G - K^T Y (centred), L^+ r = r /
// V on the complete graph, so Y + K L^+ r, that is y_ij + (r_i - r_j) / V,
// balances G exactly. The returned flow is that projected flow (stored
// compactly, see Flow); the returned potential, centred, is the best
// lower-bound potential seen. Result.Step turns it into the exact step
// S_* = -eta Phi.
//
// # Cost
//
// The flow has one m-vector per pair, V(V-1)/2 x m float64 with m =
// min(d, rank G): 2.1 GB at V = 1,024 and d = 512. Most pairs carry no
// flow at any time (a pair whose flow is zero and whose extrapolated
// potentials are within distance 1 keeps none), so an update reads and
// writes the flow of the active pairs only (a few tens times V: 49k of
// 524k pairs at V = 1,024) and decides the others without computing their
// distance while their rows have moved less than the pair's recorded
// slack (see solver.pass). An update therefore costs about 2 m
// multiply-adds per active pair plus a comparison per pair, split over
// Options.Threads goroutines by rows; the certificate, every CheckEvery
// updates, costs one full pass (V^2 m / 2). The number of updates to a
// 1e-4 gap grew about linearly with V on Zipf-frequency gradients (190 at
// V = 64, 1,400 at V = 512, 3,400 at V = 1,024). When m < d (d >= V, or a
// low-rank G) the problem is solved exactly in the m-dimensional row space
// of G (from its SVD) and mapped back. The measured timing table is in
// docs/results/oracle.
//
// The package depends only on gonum (the SVD for the rank and the row
// space) and the standard library.
package oracle
