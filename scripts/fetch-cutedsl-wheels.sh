#!/usr/bin/env bash
# Wheels for vLLM's CuTe-DSL gather on a GPU host without a registry (Python 3.12, manylinux x86_64):
# nvidia-cutlass-dsl 4.8.0 with its base, core and cu13 libraries, quack-kernels 0.6.5 and the small
# packages they import. Written to DEST (default .cutedsl-wheels, ignored by git) as
#   DEST/small/*.whl            every wheel under PART_MIB MiB (default 30)
#   DEST/parts/<wheel>.part-NN  wheels of PART_MIB MiB or more, split into PART_MIB MiB parts
#   DEST/SHA256SUMS             the hash of every whole wheel (check after joining the parts)
# so each part fits one carried transfer beside the working tree (64 MiB in all; the tree is about 25 MiB).
# On the GPU host: copy the parts out of the working tree (e.g. to ~/cutedsl) over several calls, then
# `cat <wheel>.part-* > <wheel>`, `sha256sum -c SHA256SUMS` and `pip install --no-deps --no-index ~/cutedsl/*.whl` (cuda-bindings is already installed there).
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-.cutedsl-wheels}
PY=${PYTHON:-python3}
rm -rf "$DEST" && mkdir -p "$DEST/all" "$DEST/small" "$DEST/parts"
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
           --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 "${PLATFORMS[@]}" -d "$DEST/all" \
  nvidia-cutlass-dsl==4.8.0 nvidia-cutlass-dsl-libs-base==4.8.0 nvidia-cutlass-dsl-libs-core==4.8.0 \
  nvidia-cutlass-dsl-libs-cu13==4.8.0 quack-kernels==0.6.5 'apache-tvm-ffi>=0.1.6,<0.2' torch-c-dlpack-ext \
  einops 'protobuf>=4.21.12'
(cd "$DEST/all" && sha256sum ./*.whl | sed 's# \./# #') > "$DEST/SHA256SUMS"
PART_MIB=${PART_MIB:-30}
LIMIT=$((PART_MIB * 1024 * 1024))
for wheel in "$DEST"/all/*.whl; do
  if [ "$(stat -c %s "$wheel")" -ge "$LIMIT" ]; then
    split -b "${PART_MIB}M" -d "$wheel" "$DEST/parts/$(basename "$wheel").part-"
  else
    cp "$wheel" "$DEST/small/"
  fi
done
rm -rf "$DEST/all"
du -sh "$DEST/small" "$DEST/parts"/* | sed 's#^#  #'
