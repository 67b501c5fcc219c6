#!/usr/bin/env bash
# Re-render the reports of the committed GPU runs with this checkout's report code (no kernel runs): figures,
# report.md, report.html, the comparison of the two notebook-02 runs, the merge of the release-matrix runs, and the first-screen screenshots of
# report.md as GitHub renders it and of report.html (headless Chromium; scripts/setup-browser.sh installs one).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
RUNS=()
for run in data/h200/*/ data/h100/*/ data/cpu/*/; do
  run=${run%/}
  [ -f "$run/manifest.json" ] || continue
  RUNS+=("$run")
  # `report` exits with the run's verdict: 1 (failed checks, an unfinished run) still wrote the report; 2 did not.
  rc=0
  # --repo-url "": the committed comments name the run folder's files as text, as the tests render them
  "$PY" -m repro report "$run" --repo-url "" || rc=$?
  [ "$rc" -le 1 ] || exit "$rc"
done
"$PY" -m repro report data/h200/vllm-0.22.0-under-test --against data/h200/gpu-profile || [ $? -eq 1 ]
"$PY" -m repro report data/h200/release-matrix-merged --merge data/h200/release-matrix-0.{20,21-0.24,25-0.29,30,31,32,33} data/h200/release-matrix-0.{22-0.23,24-0.25,26-0.27,28-0.29,30,31,32}-cutedsl data/h200/release-matrix-c data/h100/release-matrix-0.34 data/h100/release-matrix-0.34-cutedsl data/h100/release-matrix-pinned-* data/h100/release-matrix-0.26-cutedsl-4.6.0-0.6.1
"$PY" -m repro_studies.upstream.patch_index  # data/patches/: the newest committed diff per release
"$PY" -m repro_audit.browser "${RUNS[@]}"
