# attention_share.awk: reads the profile table that `hilbert bench model
# -profile N` writes (device/profile WriteTable: op, detail, calls,
# total ms, share, GFLOP/s; then a total row) and prints attention's share
# of the profiled step: the forward (Attention) and backward
# (AttentionBackward) rows against the total. Exits 1 when no table is
# found; says so when attention is not among the printed rows.
$1 == "op" && $2 == "detail" { table = 1; next }
table && $1 == "total" { total = $NF; table = 0; next }
table {
	ms = ""
	for (i = NF; i > 1; i--) if ($i ~ /%$/) { ms = $(i - 1); break }
	if ($1 == "Attention") { fwd += ms; seen = 1 }
	else if ($1 == "AttentionBackward") { bwd += ms; seen = 1 }
	else if ($1 ~ /^\(/) { rest = ms }
}
END {
	if (total == "" || total + 0 <= 0) { print "attention share: no profile table in the input"; exit 1 }
	if (!seen) {
		printf "attention share: no Attention row among the printed ones (%.3f ms of %.3f ms in rows not printed)\n", rest, total
		exit 0
	}
	att = fwd + bwd
	printf "attention share of the profiled step: %.1f%% (%.3f ms of %.3f ms; forward %.3f ms = %.1f%%, backward %.3f ms = %.1f%%)\n", \
		100 * att / total, att, total, fwd, 100 * fwd / total, bwd, 100 * bwd / total
}
