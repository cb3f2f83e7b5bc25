// Package optim holds Hilbert's optimizers and the machinery a trainer
// needs around them: parameter groups built from a recipe, the paper's
// learning-rate schedule, global gradient-norm clipping and the optimizer
// state that a checkpoint saves.
//
// The optimizers are those of the paper's recipe (../shared/reference/
// paper-recipe.md):
//
//   - AdamW with decoupled weight decay (the embedding, and the baseline
//     LM head),
//   - Muon, momentum orthogonalised by Newton-Schulz (every weight matrix
//     inside the blocks),
//   - RowNorm, the LM head's row-normalised EMA, in its practical form or
//     its exact projected form P RN(P .).
//
// A Recipe maps parameters, by name, to one optimizer each; NewSet checks
// that every parameter belongs to exactly one group and returns the one
// object a training loop steps:
//
//	set, err := optim.NewSet(optim.PaperRecipe(optim.PaperOptions{Width: 512}), params)
//	sched, err := optim.NewCosine(T, W)
//	for step := 0; step < T; step++ {
//	    set.ZeroGrad()
//	    // forward and backward ...
//	    norm, err := optim.ClipGradNorm(set.Params(), 1.0)
//	    err = set.Step(sched.Scale(step))
//	}
//
// Every optimizer works through device kernels (device.Device), so it runs
// on any backend unchanged, and keeps fp32 state per parameter. Each can
// keep the step it just applied, excluding weight decay (S_t in the paper),
// for the geometry diagnostics of package optim/geometry.
//
// This package depends only on device/ (and device/compose) and tensor/. It sits beside nn and
// must not depend on nn, models, autograd or any backend: parameters are
// plain tensors identified by their Name.
package optim
