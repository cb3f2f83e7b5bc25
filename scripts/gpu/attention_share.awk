# attention_share.awk: reads the profile table that `hilbert bench model
# -profile N` writes (device/profile WriteTable: op, detail, calls,
# total ms, share, GFLOP/s; then a total row) and prints attention's share
# of the profiled step: the forward (Attention) and backward
# (AttentionBackward) rows against the total, then the kernels the rows
# name after their shape (the CUDA backend: "mma.sync bf16" or "simt f32")
# and their achieved GFLOP/s (device/profile's AttentionFlops). Exits 1
# when no table is found; says so when attention is not among the printed
# rows.
$1 == "op" && $2 == "detail" { table = 1; next }
table && $1 == "total" { total = $NF; table = 0; next }
table {
	ms = ""; at = 0
	for (i = NF; i > 1; i--) if ($i ~ /%$/) { ms = $(i - 1); at = i; break }
	if ($1 == "Attention" || $1 == "AttentionBackward") {
		# detail: $2 .. $(at - 3); the kernel is what follows the D field.
		k = ""
		for (j = 2; j <= at - 3; j++) if ($j ~ /^D[0-9]+$/) { for (j++; j <= at - 3; j++) k = k (k == "" ? "" : " ") $j; break }
		if (k != "" && index(" " kernels ",", " " k ",") == 0) kernels = kernels (kernels == "" ? "" : ", ") k
		rate = at < NF ? $(at + 1) : ""
	}
	if ($1 == "Attention") { fwd += ms; seen = 1; if (rate != "") frate = rate }
	else if ($1 == "AttentionBackward") { bwd += ms; seen = 1; if (rate != "") brate = rate }
	else if ($1 ~ /^\(/) { rest = ms }
}
END {
	if (total == "" || total + 0 <= 0) { print "attention share: no profile table in the input"; exit 1 }
	if (!seen) {
		printf "attention share: no Attention row among the printed ones (%.3f ms of %.3f ms in rows not printed)\n", rest, total
		exit 0
	}
	att = fwd + bwd
	printf "attention share of the profiled step: %.1f%% (%.3f ms of %.3f ms; forward %.3f ms = %.1f%%, backward %.3f ms = %.1f%%); kernel %s; forward %s GFLOP/s, backward %s GFLOP/s\n", \
		100 * att / total, att, total, fwd, 100 * fwd / total, bwd, 100 * bwd / total, \
		kernels == "" ? "not named" : kernels, frate == "" ? "?" : frate, brate == "" ? "?" : brate
}
