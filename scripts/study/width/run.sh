#!/usr/bin/env bash
# Width study (issue 16, part 2): AdamW vs RowNorm heads at d = 128, 512, 256
# (in that order, so a cut-short session still has three widths), 2 layers,
# T 128, 16 sequences per update, 200 updates per run (409,600 tokens), the
# paper's learning rates (head: the paper's d = 512 value scaled by 512/d).
#
# usage: scripts/study/width/run.sh WORKDIR
# WORKDIR gets the binary, the shards and the runs (runs/width-d<d>/...).
# Needs /work/shared/corpus/*.txt.gz (CORPUS overrides the glob's folder).
set -euo pipefail
W=${1:?usage: run.sh WORKDIR}
CORPUS=${CORPUS:-/work/shared/corpus}
STEPS=${STEPS:-200}
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
export OPENBLAS_CORETYPE=Cooperlake
mkdir -p "$W"
(cd "$REPO" && go build -o "$W/hilbert" ./cmd/hilbert)
cd "$W"
[ -f shards/corpus_val_000000.bin ] ||
  ./hilbert prepare -out shards -prefix corpus -val-tokens 200000 "$CORPUS"/*.txt.gz
run() { # d seeds
  nice -n 15 ./hilbert compare -quiet -runs runs -name "width-d$1" -dim "$1" -layers 2 \
    -train 'shards/corpus_train_*.bin' -val shards/corpus_val_000000.bin \
    -steps "$STEPS" -val-every 100 -val-tokens 32768 -diag-every 50 -checkpoint-every 100 \
    -muon-lr 0 -embed-lr 0 -head-lr 0 -seeds "$2"
}
run 128 0,1
run 512 0
run 256 0,1
# Beyond the plan (run after it, as time allowed): a second seed at d 512.
# Seed 0's finished runs are continued as no-ops, compare.md covers both.
[ "${EXTRA:-1}" = 0 ] || run 512 0,1
