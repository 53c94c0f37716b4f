#!/usr/bin/env bash
# Paired A/B of the DENSE kernel in one process (docs/BENCHMARKS.md, "DENSE at
# the limit"): the kernel at OLD_REV (default HEAD; revisions from 82a4d3e on,
# which have sampler/buffer_pool.h) against the working tree's.
#   benchmarks/dense_ab/run.sh GRAPH_DIR BATCHES THREADS [OLD_REV]
# e.g. benchmarks/dense_ab/run.sh /tmp/dense28_g 40 2; CHECK=1 also compares
# the outputs batch by batch (see driver.cpp for the other switches).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(git -C "$here" rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/old"
git -C "$root" archive "${4:-HEAD}" gnncore/csrc | tar -x -C "$work/old" --strip-components=2
cxx="${CXX:-g++} -std=c++17 -O3 -Wall -Wextra -fopenmp -DGNNCORE_WITH_OPENMP=1"
$cxx -Dgnncore=gnncore_old -I "$work/old" -c "$work/old/sampler/dense.cpp" -o "$work/old_dense.o"
$cxx -Dgnncore=gnncore_old -I "$work/old" -c "$here/old_give.cpp" -o "$work/old_give.o"
$cxx -I "$root/gnncore/csrc" -c "$root/gnncore/csrc/sampler/dense.cpp" -o "$work/new_dense.o"
$cxx -I "$root/gnncore/csrc" "$here/driver.cpp" "$work/old_dense.o" "$work/old_give.o" \
  "$work/new_dense.o" -o "$work/driver"
"$work/driver" "$1" "$2" "$3"
