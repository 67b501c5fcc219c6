#!/usr/bin/env bash
# Re-render the reports of the committed GPU runs with this checkout's report code.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
for run in data/h200/*/; do
  run=${run%/}
  [ -f "$run/manifest.json" ] || continue
  "$PY" -m repro report "$run"
  rm -f "$run/notebooks/90-report.ipynb"           # the report notebook's own execution, not evidence
  rmdir "$run/notebooks" 2>/dev/null || true
done
"$PY" -m repro report data/h200/vllm-0.22.0-under-test --against data/h200/gpu-profile
