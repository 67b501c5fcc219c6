#!/usr/bin/env bash
# Download the wheels the GPU machine needs to run papermill and nbconvert (it has no registry).
# Usage: scripts/build-h200-wheelhouse.sh [DEST]   (default .whl, which git ignores)
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-.whl}
mkdir -p "$DEST"
PY=${PYTHON:-python3}
grep -v '^#' scripts/h200-wheels.txt | grep -v '^$' | while read -r req; do
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d "$DEST" "$req"
done
echo "$(ls "$DEST"/*.whl | wc -l) wheels, $(du -sh "$DEST" | cut -f1) in $DEST"
