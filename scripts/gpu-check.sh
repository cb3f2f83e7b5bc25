#!/usr/bin/env bash
# gpu-check.sh: check the CUDA backend on a GPU machine in one command.
#
#   scripts/gpu-check.sh build [DIR]   # here: cross-compile the test binary
#                                      # (CGO_ENABLED=0) and the runner into DIR
#   scripts/gpu-check.sh run [DIR]     # on the GPU machine: every op on CUDA
#                                      # against the CPU backend, the flash
#                                      # attention check at T=2048, GEMM and
#                                      # fused-kernel benchmarks, a 1-rank
#                                      # NCCL all-reduce, a few
#                                      # training steps with both heads, and
#                                      # the 190M step throughput next to
#                                      # PyTorch eager with bf16 autocast
#   scripts/gpu-check.sh all [DIR]     # build, then run (a machine with Go and a GPU)
#
# DIR defaults to build/gpu-check. GPU_GOARCH picks the target (amd64).
# cuda.test matches .gitignore (*.test): a tool that copies the working tree
# to the GPU machine must be told to carry DIR.
# The run stays under 8 minutes: each stage has its own timeout (see
# scripts/gpu/run.sh). Without a GPU the tests skip and say why.
set -euo pipefail

mode=${1:-all}
dir=${2:-build/gpu-check}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

build() {
	mkdir -p "$dir"
	(cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH="${GPU_GOARCH:-amd64}" \
		go test -c -o "$(cd "$dir" && pwd)/cuda.test" ./device/cuda)
	(cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH="${GPU_GOARCH:-amd64}" \
		go test -c -o "$(cd "$dir" && pwd)/geometry.test" ./optim/geometry)
	(cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH="${GPU_GOARCH:-amd64}" \
		go test -c -o "$(cd "$dir" && pwd)/nccl.test" ./dist/nccl)
	(cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH="${GPU_GOARCH:-amd64}" \
		go build -o "$(cd "$dir" && pwd)/hilbert" ./cmd/hilbert)
	cp "$root/scripts/gpu/run.sh" "$root/scripts/gpu/bench_torch.py" "$root/scripts/gpu/attention_share.awk" "$root/scripts/parity/model.py" "$dir/"
	# Training data for the GPU training stage: Opticks (shipped with Go,
	# absent on the GPU machine) tokenized here into llm.c shards.
	opticks="$(go env GOROOT)/src/testdata/Isaac.Newton-Opticks.txt"
	"$dir/hilbert" prepare -quiet -overwrite -out "$dir/data" -prefix opticks -val-tokens 20000 "$opticks" >/dev/null
	chmod +x "$dir/run.sh" "$dir/cuda.test" "$dir/geometry.test" "$dir/nccl.test" "$dir/hilbert"
	echo "gpu-check: built $dir/cuda.test, $dir/geometry.test, $dir/nccl.test, $dir/hilbert, $dir/data and $dir/run.sh"
}

case "$mode" in
build) build ;;
run) exec "$dir/run.sh" "$dir" ;;
all)
	build
	exec "$dir/run.sh" "$dir"
	;;
*)
	echo "usage: $0 build|run|all [DIR]" >&2
	exit 2
	;;
esac
