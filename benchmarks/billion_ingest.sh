#!/usr/bin/env bash
# The billion's `csv` and `ingest` stages alone, as `gnncore bench scale --edges
# 1000000000 --budget 8GiB` runs them: the same two commands, ingestion in a
# cgroup v1 memory cgroup of 8 GiB (page cache charged; needs root) after the
# CSV's pages are dropped. For A/B runs of ingestion without the partitioning
# stages (docs/BENCHMARKS.md, "The billion's ingestion").
#
#   bash benchmarks/billion_ingest.sh WORK_DIR OUT_DIR [SITE]
#
# WORK_DIR keeps the CSV (17.8 GB, made once and reused) and the graph of the
# last run (about 35 GB; scratch on top: 55 GB free at least). SITE: another
# build installed with `pip install --no-build-isolation --no-deps --target
# SITE CHECKOUT`, run in place of this checkout. Writes OUT_DIR/ingest.json
# (the command's report), ingest.time (/usr/bin/time -v) and summary.txt.
set -euo pipefail
WORK=${1:?usage: billion_ingest.sh WORK_DIR OUT_DIR [SITE]}
OUT=${2:?usage: billion_ingest.sh WORK_DIR OUT_DIR [SITE]}
SITE=${3:-}
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-$HERE/.venv/bin/python}
mkdir -p "$OUT" "$WORK"
CSV=$WORK/edges.csv
if [ ! -f "$CSV" ]; then
    /usr/bin/time -v "$PY" -m gnncore.cli.main synth "$CSV" --layout csv --nodes 100000000 \
        --avg-degree 20.0 --classes 16 --features 1 --seed 0 --no-progress 2>"$OUT/csv.time"
fi
rm -rf "$WORK/graph"
sync
"$PY" -c "import sys; from gnncore import _C; _C.evict(sys.argv[1])" "$CSV"
if [ -n "$SITE" ]; then  # the other build: this checkout's editable finder dropped
    MAIN=(-c 'import sys
sys.meta_path = [f for f in sys.meta_path if "skbc" not in type(f).__module__]
sys.path.insert(0, sys.argv.pop(1))
from gnncore.cli.main import main
sys.argv = ["gnncore"] + sys.argv[1:]
raise SystemExit(main())' "$SITE")
else
    MAIN=(-m gnncore.cli.main)
fi
CG=/sys/fs/cgroup/memory/gnncore-billion-ingest
mkdir -p "$CG"
echo $((8 << 30)) >"$CG/memory.limit_in_bytes"
echo 0 >"$CG/memory.max_usage_in_bytes" || true
echo $$ >"$CG/cgroup.procs"
/usr/bin/time -v "$PY" "${MAIN[@]}" ingest "$CSV" "$WORK/graph" --format edgelist --seed 0 \
    --memory-budget 4294967296 --no-progress --json "$OUT/ingest.json" 2>"$OUT/ingest.time"
echo $$ >/sys/fs/cgroup/memory/cgroup.procs
cp "$WORK/graph/manifest.json" "$OUT/manifest.json"
"$PY" - "$OUT" "$CG" <<'EOF' | tee "$OUT/summary.txt"
import json, re, sys
from pathlib import Path
out, cg = Path(sys.argv[1]), Path(sys.argv[2])
report = json.loads((out / "ingest.json").read_text())
wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\d+):([\d.]+)",
                 (out / "ingest.time").read_text())
print(f"process {60 * int(wall[1]) + float(wall[2]):.1f} s, in the command "
      f"{report['seconds']:.1f} s, cgroup peak {int((cg / 'memory.max_usage_in_bytes').read_text()) / 2**30:.1f} GiB")
print("phases", report["phases"])
EOF
