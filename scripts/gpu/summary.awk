# summary.awk: the one-line summary at the end of scripts/gpu/run.sh.
#
#   awk -v hilbert=bench-190m-hilbert.log -v torch=bench-190m-pytorch.log -f summary.awk
#
# Reads the tokens_per_s of the JSON line that `hilbert bench model` and
# bench_torch.py print (Hilbert's own "bench model: ... tokens/s" line on
# stderr when the JSON is missing, e.g. after a failed profile step), and
# the attention share that bench model prints with -profile, and prints
#
#   === gpu-check: summary 190m (batch 8, seq 2048): hilbert H tokens/s, pytorch P tokens/s, hilbert/pytorch R; attention S% of the profiled step
#
# with "missing (see FILE)" for a figure it cannot find. Exits 1 when
# either tokens/s is missing.
function tps(file,    line, v, found) {
	found = ""
	while ((getline line < file) > 0) {
		if (match(line, /"tokens_per_s": *[0-9.eE+-]+/)) {
			v = substr(line, RSTART, RLENGTH)
			sub(/"tokens_per_s": */, "", v)
			found = v
		} else if (found == "" && match(line, /^bench model: [0-9.eE+-]+ tokens\/s/)) {
			v = substr(line, RSTART, RLENGTH)
			sub(/^bench model: /, "", v)
			sub(/ tokens\/s$/, "", v)
			fallback = v
		}
		if (match(line, /"preset": *"[^"]*"/)) { preset = substr(line, RSTART, RLENGTH); sub(/"preset": *"/, "", preset); sub(/"$/, "", preset) }
		if (match(line, /"batch": *[0-9]+/)) { batch = substr(line, RSTART, RLENGTH); sub(/"batch": */, "", batch) }
		if (match(line, /"seq": *[0-9]+/)) { seq = substr(line, RSTART, RLENGTH); sub(/"seq": */, "", seq) }
		if (match(line, /^attention \(forward and backward\): .*, [0-9.]+%$/)) { share = line; sub(/.*, /, "", share) }
	}
	close(file)
	if (found == "" && fallback != "") found = fallback
	fallback = ""
	return found
}
BEGIN {
	h = tps(hilbert)
	t = tps(torch)
	hs = h == "" ? "missing (see " hilbert ")" : sprintf("%.0f tokens/s", h)
	ts = t == "" ? "missing (see " torch ")" : sprintf("%.0f tokens/s", t)
	rs = (h == "" || t == "" || t + 0 <= 0) ? "n/a" : sprintf("%.3f", h / t)
	as = share == "" ? "attention share not found" : "attention " share " of the profiled step"
	printf "=== gpu-check: summary %s (batch %s, seq %s): hilbert %s, pytorch %s, hilbert/pytorch %s; %s\n", \
		preset == "" ? "190m" : preset, batch == "" ? "?" : batch, seq == "" ? "?" : seq, hs, ts, rs, as
	exit (h == "" || t == "") ? 1 : 0
}
