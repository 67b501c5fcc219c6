#!/usr/bin/env bash
# Make vLLM's own Triton gather importable without installing vLLM, for side-by-side timing:
# downloads the vLLM wheel (default 0.22.0), extracts only the DeepSeek-V4 cache_utils module into
# DEST (default .vllm-ref, ignored by git; vLLM's code is never committed here) and adds the two
# tiny import shims it needs. Then: PYTHONPATH=DEST python -m repro run -p reference_gather=
#   vllm.models.deepseek_v4.common.ops.cache_utils:dequantize_and_gather_k_cache_triton
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${VLLM_VERSION:-0.22.0}
DEST=${1:-.vllm-ref}
WHEEL_DIR=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: -d "$WHEEL_DIR" "vllm==$VERSION"
MODULE=vllm/models/deepseek_v4/common/ops/cache_utils.py
mkdir -p "$DEST"
(cd "$DEST" && unzip -o -q "$WHEEL_DIR"/vllm-*.whl "$MODULE" vllm/_version.py)
for pkg in vllm vllm/models vllm/models/deepseek_v4 vllm/models/deepseek_v4/common vllm/models/deepseek_v4/common/ops vllm/utils; do
  mkdir -p "$DEST/$pkg" && touch "$DEST/$pkg/__init__.py"
done
printf 'import triton\nimport triton.language as tl\n' > "$DEST/vllm/triton_utils.py"
printf 'def has_cutedsl():\n    return False\n' > "$DEST/vllm/utils/import_utils.py"
rm -rf "$WHEEL_DIR"
echo "vLLM $VERSION gather module in $DEST/$MODULE"
