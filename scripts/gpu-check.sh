#!/usr/bin/env bash
# gpu-check.sh: check the CUDA backend on a GPU machine in one command.
#
#   scripts/gpu-check.sh build [DIR]   # here: cross-compile the test binaries
#                                      # and hilbert (CGO_ENABLED=0, stripped)
#                                      # into DIR and pack them into
#                                      # DIR/gpu-check.tar.gz
#   scripts/gpu-check.sh run [DIR]     # on the GPU machine: unpack
#                                      # DIR/gpu-check.tar.gz if it is there,
#                                      # then scripts/gpu/run.sh: parity of
#                                      # every op on CUDA against the CPU
#                                      # backend, the 190M step tokens/s next
#                                      # to PyTorch eager with bf16 autocast,
#                                      # the profile's attention share, then
#                                      # GEMM and fused-kernel benchmarks,
#                                      # geometry, a 1-rank NCCL all-reduce
#                                      # and a few training steps
#   scripts/gpu-check.sh size [DIR]    # fail unless DIR/gpu-check.tar.gz is
#                                      # there and within GPU_CHECK_MAX_MIB
#                                      # (build ends with this check)
#   scripts/gpu-check.sh all [DIR]     # build, then run (a machine with Go and a GPU)
#
# DIR defaults to build/gpu-check. GPU_GOARCH picks the target (amd64).
#
# The GPU machine has no Go: build here, then carry only the tarball. With
# the device tool (a copy of the working tree plus the carried ignored
# paths, 64 MiB at most), from the repository root:
#
#   scripts/gpu-check.sh build
#   run  carry=["build/gpu-check/gpu-check.tar.gz"]
#        command="scripts/gpu-check.sh run"   timeout_s=500
#
# The logs land in $OUT (one NAME.log a stage) and come back with the run.
# build writes DIR/.gitignore ("*"), so that nothing in DIR travels as an
# untracked file of the working tree; the tarball must be carried. build
# fails when the tarball exceeds GPU_CHECK_MAX_MIB (56) MiB: the binaries
# are stripped (-ldflags='-s -w': no symbol table, no DWARF; stack traces
# keep their file:line from the pclntab). The 32 MiB symbol
# crypto/internal/fips140/drbg.memory that `go tool nm` lists in hilbert is
# the FIPS entropy scratch buffer in .noptrbss (NOBITS): it takes address
# space, not a byte of the file, and no build setting is needed for it.
#
# The run stays under 8 minutes: scripts/gpu/run.sh keeps a global
# deadline (GPU_CHECK_DEADLINE, 450 s) and gives each stage the smaller of
# its own limit and the time left. Without a GPU the tests skip and say why.
set -euo pipefail

mode=${1:-all}
dir=${2:-build/gpu-check}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tarball=gpu-check.tar.gz
max_mib=${GPU_CHECK_MAX_MIB:-56}

build() {
	mkdir -p "$dir"
	local abs
	abs=$(cd "$dir" && pwd)
	printf '*\n' >"$abs/.gitignore"
	rm -f "$abs/$tarball"
	local env=(env CGO_ENABLED=0 GOOS=linux GOARCH="${GPU_GOARCH:-amd64}")
	local ld=(-ldflags='-s -w')
	(cd "$root" && "${env[@]}" go test -c "${ld[@]}" -o "$abs/cuda.test" ./device/cuda)
	(cd "$root" && "${env[@]}" go test -c "${ld[@]}" -o "$abs/geometry.test" ./optim/geometry)
	(cd "$root" && "${env[@]}" go test -c "${ld[@]}" -o "$abs/nccl.test" ./dist/nccl)
	(cd "$root" && "${env[@]}" go build "${ld[@]}" -o "$abs/hilbert" ./cmd/hilbert)
	cp "$root/scripts/gpu/run.sh" "$root/scripts/gpu/bench_torch.py" "$root/scripts/gpu/attention_share.awk" \
		"$root/scripts/gpu/summary.awk" "$root/scripts/parity/model.py" "$abs/"
	# Training data for the GPU training stage: Opticks (shipped with Go,
	# absent on the GPU machine) tokenized here into llm.c shards.
	opticks="$(go env GOROOT)/src/testdata/Isaac.Newton-Opticks.txt"
	rm -rf "$abs/data"
	"$abs/hilbert" prepare -quiet -overwrite -out "$abs/data" -prefix opticks -val-tokens 20000 "$opticks" >/dev/null
	chmod +x "$abs/run.sh" "$abs/cuda.test" "$abs/geometry.test" "$abs/nccl.test" "$abs/hilbert"
	local files=(run.sh bench_torch.py attention_share.awk summary.awk model.py cuda.test geometry.test nccl.test hilbert data)
	tar -C "$abs" -czf "$abs/$tarball" "${files[@]}"
	echo "gpu-check: built $dir ($(du -sk "${files[@]/#/$abs/}" | awk '{k += $1} END {printf "%.1f", k / 1024}') MiB unpacked)"
	check_size
}

# check_size fails when DIR's tarball is missing or over max_mib MiB.
check_size() {
	if [[ ! -f "$dir/$tarball" ]]; then
		echo "gpu-check: no $dir/$tarball: run '$0 build $dir' first" >&2
		exit 1
	fi
	local bytes
	bytes=$(wc -c <"$dir/$tarball")
	if ((bytes > max_mib * 1048576)); then
		echo "gpu-check: $dir/$tarball is $bytes bytes, over the $max_mib MiB budget for what the device run carries (64 MiB in all)" >&2
		exit 1
	fi
	echo "gpu-check: $dir/$tarball is $(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1048576}') MiB (budget $max_mib MiB): carry it"
}

# unpack replaces DIR's files with the tarball's when it is there (on the
# GPU machine only the tarball is carried; older files left from an
# earlier call must not be run).
unpack() {
	if [[ -f "$dir/$tarball" ]]; then
		tar -C "$dir" -xzf "$dir/$tarball"
		echo "gpu-check: unpacked $dir/$tarball"
	elif [[ ! -x "$dir/run.sh" ]]; then
		echo "gpu-check: neither $dir/$tarball nor $dir/run.sh: run '$0 build $dir' on a machine with Go and carry $dir/$tarball" >&2
		exit 2
	fi
}

case "$mode" in
build) build ;;
size) check_size ;;
run)
	unpack
	exec "$dir/run.sh" "$dir"
	;;
all)
	build
	exec "$dir/run.sh" "$dir"
	;;
*)
	echo "usage: $0 build|size|run|all [DIR]" >&2
	exit 2
	;;
esac
