#!/usr/bin/env bash
# Wheels for vLLM's CuTe-DSL gather on a GPU host without a registry (Python 3.12, manylinux x86_64): the stack the
# newest releases pin, nvidia-cutlass-dsl 4.8.0 with quack-kernels 0.6.5, and everything their wheels require
# (scripts/fetch-cutedsl-wheels.py, which fetches any pairs). Written to DEST (default .cutedsl-wheels, ignored by git) as
#   DEST/small/*.whl            every wheel under PART_MIB MiB (default 30)
#   DEST/parts/<wheel>.part-NN  wheels of PART_MIB MiB or more, split into PART_MIB MiB parts
#   DEST/SHA256SUMS             the hash of every whole wheel (check after joining the parts)
# so each part fits one carried transfer beside the working tree (64 MiB in all; the tree is about 25 MiB).
# On the GPU host scripts/cutedsl-pins.sh copies the parts out of the working tree (to ~/cutedsl-pins) over several
# calls, and scripts/cutedsl-env.sh joins, checks and installs the pair (cuda-bindings is already installed there).
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-.cutedsl-wheels}
rm -rf "$DEST"
PART_MIB=${PART_MIB:-30} "${PYTHON:-python3}" scripts/fetch-cutedsl-wheels.py "$DEST" 4.8.0/0.6.5
du -sh "$DEST/small" "$DEST/parts"/* | sed 's#^#  #'
