#!/bin/sh
# GFLOP/s of Hilbert's bfloat16 GEMM (Device.Gemm on bfloat16 operands: the
# AMX or VDPBF16PS kernel, or float32 after widening where the CPU has
# neither) beside its float32 native GEMM, and of PyTorch's CPU matmul on
# float32 and bfloat16 tensors (scripts/parity/gemm.py), on 2048x768x768 and
# the paper model's block products at d 128 and 256 (8 x 256 tokens), on 1
# and 2 threads. Hilbert and PyTorch take turns ROUNDS times (default 3),
# each round timing every shape REPS times (default 10) per GEMM,
# interleaved; the table gives, per shape and thread count, the median over
# the rounds of each GEMM's best rate, the ratios of those medians, and the
# spread (lowest-highest) of bf16/f32.
# Usage: scripts/parity/gemm_bf16.sh [SHAPES]
# PyTorch runs on OpenBLAS's AVX-512 kernels (OPENBLAS_CORETYPE=Cooperlake,
# the OpenMP build) for float32; its bfloat16 matmul is oneDNN's (AMX on
# this CPU, in 1.13). Its OpenMP threads wait passively between calls
# (OMP_WAIT_POLICY=PASSIVE unless set), as Hilbert asks of OpenBLAS: on a
# busy machine spinning threads took PyTorch's 2-thread rates to a few
# GFLOP/s.
set -eu
export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Cooperlake}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
shapes=${1:-2048x768x768,2048x128x128:nt,2048x128x128:nn,128x128x2048:tn,2048x512x128:nt,2048x128x512:nn,512x128x2048:tn,128x512x2048:tn,2048x256x256:nt,2048x1024x256:nt,2048x256x1024:nn,1024x256x2048:tn}
rounds=${ROUNDS:-3}
reps=${REPS:-10}
dir=$(dirname "$0")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
go build -o "$out/hilbert" ./cmd/hilbert
r=1
while [ "$r" -le "$rounds" ]; do
	for t in 1 2; do
		"$out/hilbert" bench gemm -gemms native,bf16 -threads "$t" -reps "$reps" -shapes "$shapes" 2>>"$out/stderr" |
			sed "s/^/hilbert $t /" >>"$out/lines"
		/usr/bin/python3 "$dir/gemm.py" -threads "$t" -reps "$reps" "$shapes" | sed "s/^/torch $t /" >>"$out/lines"
	done
	r=$((r + 1))
done
grep -m1 'hilbert: GEMM' "$out/stderr" || true
/usr/bin/python3 - "$out/lines" <<'EOF'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    who, threads, js = line.split(" ", 2)
    r = json.loads(js)
    if r.get("summary"):
        continue
    d = rows.setdefault((r["shape"], int(threads)), {})
    if who == "hilbert":
        d.setdefault("f32", []).append(r["native_gflops"])
        d.setdefault("bf16", []).append(r["bf16_gflops"])
        d["kernel"] = r["bf16_kernel"]
    else:
        d.setdefault("tf32", []).append(r["torch_f32_gflops"])
        d.setdefault("tbf16", []).append(r["torch_bf16_gflops"])
med = statistics.median
print("%-18s %3s %9s %9s %9s %9s %10s %14s %12s" % ("shape", "thr", "f32", "bf16", "torch f32", "torch bf16",
      "bf16/f32", "(spread)", "bf16/torch"))
for (shape, t), d in sorted(rows.items(), key=lambda x: (x[0][1], x[0][0])):
    ratios = [b / f for b, f in zip(d["bf16"], d["f32"])]
    print("%-18s %3d %9.1f %9.1f %9.1f %9.1f %9.2fx %6.2f-%5.2f %11.2fx" % (
        shape, t, med(d["f32"]), med(d["bf16"]), med(d["tf32"]), med(d["tbf16"]),
        med(d["bf16"]) / med(d["f32"]), min(ratios), max(ratios), med(d["bf16"]) / med(d["tbf16"])))
print("GFLOP/s: median over %d rounds of each GEMM's best of its repetitions; bf16 kernel: %s" % (
    len(next(iter(rows.values()))["f32"]), next(iter(rows.values())).get("kernel")))
EOF
