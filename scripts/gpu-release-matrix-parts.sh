#!/usr/bin/env bash
# The H200 release matrix in parts that each end well inside a 600-second command limit (about 15 s per kernel
# arm that runs; arms whose launch path matches one already run in the same part share its rows), through
# scripts/gpu-release-matrix.sh with the carried gather cache (download=false). Parts:
#   20x  0.20.0-0.20.2                                                   (2-6 arms, about 1-2 min)
#   b1   0.21.0 0.22.1 0.23.0 0.24.0 0.25.0 0.25.1 0.26.0 0.27.0 0.27.1 0.29.0   (10 arms, about 3 min)
#   b2   0.30.0 0.31.0                                                   (14 arms, about 4 min)
#   b3   0.32.0                                                          (10 arms, about 3 min)
# b1-b3 are release-matrix-b's 13 releases; merge them (on any host) into one run folder, then the merged matrix:
#   python -m repro report data/h200/release-matrix-b --merge RUN_b1 RUN_b2 RUN_b3
#   python -m repro report data/h200/release-matrix-merged --merge data/h200/release-matrix-{a,b,c} RUN_20x
# Usage: scripts/gpu-release-matrix-parts.sh PART RUN_DIR [more python -m repro run options]
set -euo pipefail
cd "$(dirname "$0")/.."
PART=${1:?usage: scripts/gpu-release-matrix-parts.sh PART RUN_DIR [options]; PART is 20x, b1, b2 or b3}
RUN_DIR=${2:?usage: scripts/gpu-release-matrix-parts.sh PART RUN_DIR [options]}
shift 2
case "$PART" in
  20x) releases=0.20.0,0.20.1,0.20.2 ;;
  b1) releases=0.21.0,0.22.1,0.23.0,0.24.0,0.25.0,0.25.1,0.26.0,0.27.0,0.27.1,0.29.0 ;;
  b2) releases=0.30.0,0.31.0 ;;
  b3) releases=0.32.0 ;;
  *) echo "PART: '$PART' is not a part; accepted: 20x, b1, b2, b3" >&2; exit 2 ;;
esac
exec scripts/gpu-release-matrix.sh "$RUN_DIR" -p releases="$releases" "$@"
