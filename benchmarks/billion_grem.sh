#!/usr/bin/env bash
# The billion's `grem:0.01` stage alone, as `gnncore bench scale --edges
# 1000000000 --budget 8GiB` runs it: `gnncore partition --method grem --parts
# 16 --chunk 0.01` of the graph that benchmarks/billion_ingest.sh left in
# WORK_DIR/graph, in a cgroup v1 memory cgroup of 8 GiB (page cache charged;
# needs root), with its progress lines (a line per bisection, with seconds per
# phase). For A/B runs of GREM at the billion (docs/BENCHMARKS.md, "GREM at the
# billion on both cores").
#
#   bash benchmarks/billion_grem.sh WORK_DIR OUT_DIR [EXTRA PARTITION FLAGS...]
#   bash benchmarks/billion_grem.sh /work/scale-runs/w1b31 out/auto
#   bash benchmarks/billion_grem.sh /work/scale-runs/w1b31 out/one --workers 1
#
# The partition is written to WORK_DIR/partition (about 1.5 GB) and removed
# after; GREM's per-side edge files (up to 14 GB at once with two workers) go
# to TMPDIR. Writes OUT_DIR/grem.json (the command's report), grem.stderr (its
# progress and /usr/bin/time -v) and summary.txt.
set -euo pipefail
WORK=${1:?usage: billion_grem.sh WORK_DIR OUT_DIR [FLAGS...]}
OUT=${2:?usage: billion_grem.sh WORK_DIR OUT_DIR [FLAGS...]}
shift 2
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-$HERE/.venv/bin/python}
GRAPH=$WORK/graph
PART=$WORK/partition
[ -f "$GRAPH/manifest.json" ] || { echo "no graph in $GRAPH: run billion_ingest.sh first" >&2; exit 2; }
mkdir -p "$OUT"
rm -rf "$PART"
sync
CG=/sys/fs/cgroup/memory/gnncore-billion-grem
mkdir -p "$CG"
echo $((8 << 30)) >"$CG/memory.limit_in_bytes"
echo 0 >"$CG/memory.max_usage_in_bytes" || true
echo $$ >"$CG/cgroup.procs"
OMP_NUM_THREADS=2 /usr/bin/time -v "$PY" -m gnncore.cli.main partition "$GRAPH" "$PART" \
    --method grem --parts 16 --seed 0 --memory-budget 1073741824 --chunk 0.01 "$@" \
    --json "$OUT/grem.json" >/dev/null 2>"$OUT/grem.stderr"
echo $$ >/sys/fs/cgroup/memory/cgroup.procs
rm -rf "$PART"
"$PY" - "$OUT" "$CG" <<'EOF' | tee "$OUT/summary.txt"
import json, re, sys
from pathlib import Path
out, cg = Path(sys.argv[1]), Path(sys.argv[2])
report = json.loads((out / "grem.json").read_text())
log = (out / "grem.stderr").read_text()
wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\d+):([\d.]+)", log)
assigned = re.search(r"assigned in ([\d.]+) s", log)
print(f"assign {float(assigned[1]):.1f} s, process {60 * int(wall[1]) + float(wall[2]):.1f} s, "
      f"cut {100 * report['edge_cut_fraction']:.3f}%, largest part {report['max_part_ratio']:.4f}, "
      f"reported peak {report['peak_rss_bytes'] / 2**20:,.0f} MiB, cgroup peak "
      f"{int((cg / 'memory.max_usage_in_bytes').read_text()) / 2**30:.1f} GiB")
EOF
