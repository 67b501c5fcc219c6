#!/usr/bin/env bash
# Re-render the reports of the committed GPU runs with this checkout's report code (no kernel runs): figures,
# report.md, report.html, the comparison of the two runs, and the first-screen screenshots of report.md as
# GitHub renders it and of report.html (headless Chromium; scripts/setup-browser.sh installs one).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
RUNS=(data/h200/gpu-profile data/h200/vllm-0.22.0-under-test)
for run in "${RUNS[@]}"; do
  "$PY" -m repro report "$run"
  rm -rf "$run/notebooks"
done
"$PY" -m repro report data/h200/vllm-0.22.0-under-test --against data/h200/gpu-profile
"$PY" -m repro.report.browser "${RUNS[@]}"
