#!/usr/bin/env bash
# Issue 28's GPU check, as one script for a lent GPU machine (docs/BENCHMARKS.md,
# "Epochs on a GPU"): where one rank's epoch goes (compute, stall, sampling,
# exchange) with 0 to 8 sampling threads, the multi-rank figures beside it, and
# the CUDA tests of distributed training.
#
#   bash benchmarks/gpu_epoch_check.sh OUT_DIR
#
# Run from the repository root on the GPU machine. Wheels of what its image
# lacks (polars, polars-runtime, pymetis), if carried in .whl/, are installed
# first; the C++ extension is built there. Every step has its own time limit and
# appends to OUT_DIR/summary.md, so a step that fails leaves the others' figures.
set -uo pipefail
OUT=${1:?usage: gpu_epoch_check.sh OUT_DIR}
WORK=${GPU_CHECK_WORK:-/tmp/gpu-check}
mkdir -p "$OUT" "$WORK"
export PYTHONUNBUFFERED=1
SUMMARY="$OUT/summary.md"
step() { echo "== $* ($(date +%T))" | tee -a "$OUT/log.txt"; }

step install
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 -c "import torch, torch_geometric as g; print('torch', torch.__version__, 'pyg', g.__version__)"
    nproc
} | tee "$SUMMARY"
CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) timeout 400 python3 -m pip install -q --no-index --no-deps \
    --no-build-isolation -e . >"$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log"; exit 1; }

step graph
timeout 120 python3 benchmarks/distributed.py --data "$WORK/data" --build-only | tail -1
G="$WORK/data/graph"

bench() {  # NAME TIMEOUT ARGS...: one `gnncore bench distributed` run, its table appended
    local name=$1 limit=$2
    shift 2
    step "$name"
    timeout "$limit" python3 -m gnncore.cli.main bench distributed "$G" --out "$WORK/$name" \
        --work-dir "$WORK/work" --device cuda --epochs 3 "$@" >"$WORK/$name.log" 2>&1 ||
        tail -20 "$WORK/$name.log"
    { echo; echo "### $name: $*"; tail -n 4 "$WORK/$name/distributed.md"; } >>"$SUMMARY" 2>/dev/null
}

# One NCCL rank: the epoch with the exchanges in the loop, and 1, 4, 8 threads ahead.
for k in 0 1 4 8; do
    bench "nccl-1-prefetch$k" 120 --backend nccl --nproc 1 --partitioners random --prefetch-workers "$k"
done

step tests
timeout 240 python3 -m pytest -q -p no:cacheprovider --tb=short \
    tests/gnncore/distributed/test_distributed_training.py -k "gpu or nccl" >"$WORK/tests.log" 2>&1
{ grep -E "^E |Error" "$WORK/tests.log" | head -12; tail -3 "$WORK/tests.log"; } | tee -a "$SUMMARY"

# Several ranks sharing the GPU (gloo): today's table's rows, with 1 and 4 threads.
for k in 1 4; do
    bench "gloo-metis-prefetch$k" 200 --backend gloo --nproc 2,4 --partitioners metis --prefetch-workers "$k"
done

step single-process
timeout 150 python3 benchmarks/pipelined_training.py --graph-dir "$G" --workers 0,1,4 --epochs 3 \
    --train-nodes 10000 --batch-size 1000 --fanouts 10,5 --hidden 256 --device cuda \
    --out "$WORK/single" >"$WORK/single.log" 2>&1 || tail -20 "$WORK/single.log"
{ echo; echo "### single process (fit, Prefetcher)"; cat "$WORK/single/pipelined_training.md"; } \
    >>"$SUMMARY" 2>/dev/null

step pack
tar -czf "$OUT/results.tar.gz" -C "$WORK" --exclude=data --exclude=work . 2>/dev/null
cat "$SUMMARY"
