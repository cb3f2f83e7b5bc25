#!/usr/bin/env bash
# Horizon study (issue 26): AdamW vs RowNorm heads at V = 1024 (a BPE
# trained on the shared corpus), d = 64 and 128, at horizons of 0.5, 2, 5
# and 20 tokens per parameter, each its own schedule (warmup floor(0.1 T),
# cosine to 0.1 at T), the paper's learning rates (head: the paper's d = 512
# value scaled by 512/d). Plan and sizes: docs/results/horizon/PLAN.md.
#
# usage: scripts/study/horizon/run.sh WORKDIR [PART...]
#   PART: A B C D E1 E2 F (see below), or all (the default: A B C D E1 E2);
#   docs copies the finished runs' small files into docs/results/horizon.
# WORKDIR gets the binary, the data (WORKDIR/data) and the runs
# (WORKDIR/runs/hz-d<d>-tpp<x>/<head>-seed<k>/). Every run checkpoints and
# `hilbert compare` continues a run that has a checkpoint, so a stopped part
# resumes where it stopped when run again, and a finished run is a no-op.
# After a horizon's runs, each run's loss on the 64 validation pieces goes
# to RUN/valpieces.tsv (for the standard errors; skipped when present).
# WORKDIR/parts.log records each part's start and end.
# CORPUS overrides /work/shared/corpus; NICE the niceness (19).
set -euo pipefail
W=${1:?usage: run.sh WORKDIR [PART...]}
shift
PARTS=${*:-all}
[ "$PARTS" = all ] && PARTS="A B C D E1 E2"
CORPUS=${CORPUS:-/work/shared/corpus}
NICE=${NICE:-19}
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
CONFIG=$REPO/scripts/study/horizon/horizon.yaml
mkdir -p "$W"
(cd "$REPO" && go build -o "$W/hilbert" ./cmd/hilbert && go build -o "$W/horizondata" ./scripts/study/horizondata)
cd "$W"
[ -f data/bpe1024_train_000000.bin ] ||
  ./horizondata -out data -vocab 1024 -val-frac 0.08 -chunks 64 -seq-len 128 "$CORPUS"/*.txt.gz

# run D TPP SEEDS [HEADS]: one horizon at one width, both heads (or HEADS).
# Parameters 32 d^2 + 2 V d (2 blocks of 16 d^2, embedding and head of
# 1024 x d); T = TPP x params / 2048 tokens per update.
run() {
  local d=$1 tpp=$2 seeds=$3 heads=${4:-adamw,rownorm}
  local params=$((32 * d * d + 2048 * d))
  local steps
  steps=$(awk -v t="$tpp" -v p="$params" 'BEGIN { printf "%d", t * p / 2048 + 0.5 }')
  local val=$steps # validations at 0 and T; the longest horizon also at T/4, T/2, 3T/4
  [ "$tpp" = 20 ] && val=$((steps / 4))
  local diag=$((steps / 32 > 1 ? steps / 32 : 1))
  local ck=$((steps / 8 > 50 ? steps / 8 : 50))
  nice -n "$NICE" ./hilbert compare -quiet -config "$CONFIG" -runs runs -name "hz-d$d-tpp$tpp" -dim "$d" \
    -train 'data/bpe1024_train_*.bin' -val data/bpe1024_val_000000.bin -val-tokens 1000000 \
    -panel-seqs 64 -steps "$steps" -val-every "$val" -diag-every "$diag" -checkpoint-every "$ck" \
    -seeds "$seeds" -head-optimizers "$heads"
  local h k
  for h in ${heads//,/ }; do
    for k in ${seeds//,/ }; do pieces "runs/hz-d$d-tpp$tpp/$h-seed$k"; done
  done
}

# pieces RUN: the finished run's loss on each of the 64 validation pieces
# (RUN/valpieces.tsv, for the standard errors; one validation pass).
pieces() {
  [ -f "$1/valpieces.tsv" ] && return
  local c out=$1/valpieces.tsv.part
  printf 'piece\tloss\n' >"$out"
  for c in data/valchunks/bpe1024_val_*.bin; do
    nice -n "$NICE" ./hilbert eval -run "$1" -val "$c" |
      awk -v p="$(basename "$c" .bin)" '/val loss/ { sub(/.*_val_0*/, "", p); printf "%d\t%s\n", p, $7 }' >>"$out"
  done
  mv "$out" "$1/valpieces.tsv"
}

# docs: the runs' small files into REPO/docs/results/horizon, enough for
# horizonplot to remake horizon.md and the plots from the repository
# (-runs docs/results/horizon/runs -data docs/results/horizon): per horizon
# compare.md and its plots; per run valpieces.tsv and metrics.jsonl cut to
# the records horizonplot reads (validations, diagnostics and the last
# update); the pieces' books (valchunks/sources.tsv). No checkpoints.
docs() {
  local out=$REPO/docs/results/horizon h r
  mkdir -p "$out/valchunks"
  cp data/valchunks/sources.tsv "$out/valchunks/"
  for h in runs/hz-*; do
    [ -f "$h/compare.md" ] || continue
    mkdir -p "$out/$h"
    cp "$h"/compare.md "$h"/compare_*.png "$out/$h/"
    for r in "$h"/*-seed*; do
      [ -f "$r/metrics.jsonl" ] || continue
      mkdir -p "$out/$r"
      awk '/"(val_loss|diameter|hilbert_rms)"/ { print; kept = NR } { last = $0 } END { if (kept != NR) print last }' \
        "$r/metrics.jsonl" >"$out/$r/metrics.jsonl"
      if [ -f "$r/valpieces.tsv" ]; then cp "$r/valpieces.tsv" "$out/$r/"; fi
    done
  done
}

part() {
  case $1 in
  A) run 64 0.5 0,1; run 64 2 0,1; run 64 5 0,1 ;;  # d 64, short horizons, 12 runs
  B) run 64 20 0,1,2 ;;                             # d 64, 20 tokens/param, 6 runs
  C) run 128 0.5 0,1; run 128 2 0,1 ;;              # d 128, 8 runs
  D) run 128 5 0,1 ;;                               # d 128, 4 runs
  E1) run 128 20 0 adamw ;;                         # d 128, 20 tokens/param, seed 0, one run each
  E2) run 128 20 0 rownorm; run 128 20 0 ;;         # (the last: compare.md of both, no training)
  F) run 128 20 0,1 ;;                              # beyond the plan: a second seed at d 128, 20 tokens/param
  docs) docs ;;
  *) echo "run.sh: unknown part $1 (want A B C D E1 E2 F, all or docs)" >&2; exit 2 ;;
  esac
}

for p in $PARTS; do
  echo "part $p start $(date -u +%FT%TZ)" >>parts.log
  part "$p"
  echo "part $p end $(date -u +%FT%TZ)" >>parts.log
done
