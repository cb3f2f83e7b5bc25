#!/usr/bin/env bash
# gpu-check.sh: check the CUDA backend on a GPU machine in one command.
#
#   scripts/gpu-check.sh build [DIR]   # here: cross-compile the test binary
#                                      # (CGO_ENABLED=0) and the runner into DIR
#   scripts/gpu-check.sh run [DIR]     # on the GPU machine: every op on CUDA
#                                      # against the CPU backend, the flash
#                                      # attention check at T=2048, GEMM and
#                                      # fused-kernel benchmarks
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
	cp "$root/scripts/gpu/run.sh" "$dir/run.sh"
	chmod +x "$dir/run.sh" "$dir/cuda.test"
	echo "gpu-check: built $dir/cuda.test and $dir/run.sh"
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
