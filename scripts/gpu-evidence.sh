#!/usr/bin/env bash
# The H200 evidence of data/h200/ on a GPU host without a registry, in steps that each end inside a 600-second
# command limit: the runs of a step go in parallel (16 CPU cores; the GPU work is small), and a run still going at
# DEADLINE_S (default 540) is stopped with SIGTERM, which leaves it `interrupted` and resumable with --resume.
# Carry .whl (scripts/build-h200-wheelhouse.sh), .vllm-cache-gpu (python -m repro_studies.upstream.fetch --export
# .vllm-cache-gpu) and, for the CuTe-DSL arms, the CuTe-DSL wheels (scripts/fetch-cutedsl-wheels.sh; their parts may
# come over several calls, scripts/cutedsl-pins.sh stashes them). The patches step needs GNU patch on PATH.
# Usage: scripts/gpu-evidence.sh STEP OUT_DIR
#   matrix-old  notebook 04 (matrix, patches, vLLM's regression test) for 0.20.0 .. 0.29.0, three runs
#   matrix-new  the same for 0.30.0 .. 0.33.0, one run per release
#   matrix-cutedsl  the CuTe-DSL rows (install its wheels first): notebook 04 for 0.22.0 .. 0.29.0, 0.31.0 and 0.32.0 in
#               six runs, without vLLM's regression test and the record gathers (their rows come from the steps above)
#   matrix-pinned  the CuTe-DSL rows of each release with the stack it pins (scripts/fetch-cutedsl-wheels.py writes
#               the pairs' wheels to .cutedsl-pins; scripts/cutedsl-pins.sh installs each pair once): notebook 04 for
#               RELEASES (default 0.22.0 .. 0.31.0), one run per pinned pair as
#               `python -m repro_studies.upstream.cutedsl_stack` reads it from each release's wheel, released arms only,
#               without vLLM's regression test and the record gathers; a pair whose wheels are not all here is skipped;
#               PAIR="CUTLASS QUACK" runs RELEASES with that stack instead (e.g. the newest quack-kernels a `>=` admitted
#               on the release's day)
#   profile     notebooks 01 and 03 with vLLM 0.22.0's and 0.33.0's kernels (CuTe-DSL when installed)
#   gather      notebook 02: the sweep, memory safety and compute-sanitizer
#   gather-outside  notebook 02 with an implementation from outside the repository (tests' mutants:buggy_pitch, the
#               buggy pitch called from another module) and one that repoints out: each runs in case processes that
#               copy the case's tensors onto the device and back, judged by the notebook's kernel (no memcheck)
#   matrix-034  vLLM 0.34.0: notebook 03 (its CuTe-DSL gather and its V4.1 gathers, the rewritten NVFP4 one among them,
#               timed beside gather_fast and the fast V4.1 gathers) alone on the GPU first, then notebook 04 twice in
#               parallel (small GPU work): without the CuTe-DSL stack on the path (matrix, patch, regression test,
#               record gathers) and with it (the CuTe-DSL rows, released arms only); install the CuTe-DSL wheels first
# Each run is OUT_DIR/<name> with its log OUT_DIR/<name>.log; merge the matrix runs afterwards with
#   python -m repro report MERGED --merge OUT_DIR/m-*
# PROFILE=cpu PYTHON=.venv/bin/python runs a step's runs on this machine's interpreter instead (no wheelhouse, no
# GPU): what of the step a CPU can check.
set -euo pipefail
cd "$(dirname "$0")/.."
STEP=${1:?usage: scripts/gpu-evidence.sh STEP OUT_DIR; STEP is matrix-old, matrix-new, matrix-cutedsl, matrix-034, matrix-pinned, profile, gather or gather-outside}
OUT=${2:?usage: scripts/gpu-evidence.sh STEP OUT_DIR}
DEADLINE_S=${DEADLINE_S:-540}
WHEELS=${WHEELS:-.whl}
SITE=${SITE:-/tmp/repro-site}
PROFILE=${PROFILE:-gpu}
PY=${PYTHON:-python3}
if [ "$PROFILE" = gpu ] && [ ! -e "$SITE/.installed" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl
  touch "$SITE/.installed"
fi
export PYTHONPATH="$SITE:$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
# The project's entry points (the studies' registrations) for this checkout, run from src/ without pip install
DIST_INFO=$(mktemp -d) && "$PY" scripts/write-dist-info.py "$DIST_INFO" && export PYTHONPATH="$DIST_INFO:$PYTHONPATH"
export JUPYTER_PATH="$SITE/share/jupyter"
export PYTHONUNBUFFERED=1
if [ -d .vllm-cache-gpu ]; then export REPRO_VLLM_CACHE="${REPRO_VLLM_CACHE:-$PWD/.vllm-cache-gpu}"; fi
PLAIN_PYTHONPATH=$PYTHONPATH  # without the CuTe-DSL stack: the runs that must see vLLM fall back to Triton
. scripts/cutedsl-env.sh  # the newest pinned pair on PYTHONPATH; pinned_site for the others
mkdir -p "$OUT"
pids=()
start_on() {  # start_on PYTHONPATH NAME [python -m repro run options]: one run in the background
  local path=$1 name=$2
  shift 2
  PYTHONPATH=$path "$PY" -m repro run --profile "$PROFILE" --out "$OUT/$name" "$@" >"$OUT/$name.log" 2>&1 &
  pids+=($!)
}
start() { start_on "$PYTHONPATH" "$@"; }
start_plain() { start_on "$PLAIN_PYTHONPATH" "$@"; }  # the CuTe-DSL stack off the path: import cutlass fails
t0=$(date +%s)
wait_alone() {  # wait for the runs started so far, at most until $1 seconds after the start
  while [ "$(jobs -rp | wc -l)" -gt 0 ] && [ $(($(date +%s) - t0)) -lt "$1" ]; do sleep 2; done
}
case "$STEP" in
  matrix-old)
    start m-020 --notebooks 04 -p download=false -p releases=0.20.0,0.20.1,0.20.2
    start m-021 --notebooks 04 -p download=false -p releases=0.21.0,0.22.0,0.22.1,0.23.0,0.24.0
    start m-025 --notebooks 04 -p download=false -p releases=0.25.0,0.25.1,0.26.0,0.27.0,0.27.1,0.28.0,0.29.0
    ;;
  matrix-new)
    for v in 0.30.0 0.31.0 0.32.0 0.33.0; do start "m-${v//./}" --notebooks 04 -p download=false -p releases="$v"; done
    ;;
  matrix-cutedsl)
    only=(--notebooks 04 -p download=false -p upstream_test=false -p 'record_gathers=[]')
    start c-022 "${only[@]}" -p releases=0.22.0,0.22.1,0.23.0
    start c-024 "${only[@]}" -p releases=0.24.0,0.25.0,0.25.1
    start c-026 "${only[@]}" -p releases=0.26.0,0.27.0,0.27.1
    start c-028 "${only[@]}" -p releases=0.28.0,0.29.0
    start c-031 "${only[@]}" -p releases=0.31.0
    start c-032 "${only[@]}" -p releases=0.32.0
    ;;
  matrix-034)
    if [ "$PROFILE" = gpu ] && [ -z "$CUTEDSL_DIRS" ]; then
      echo "matrix-034 needs the CuTe-DSL wheels installed (scripts/fetch-cutedsl-wheels.sh, scripts/cutedsl-env.sh)" >&2
      exit 2
    fi
    start p-034 --notebooks 03 -p download=false -p 'vllm_releases=[0.34.0]'
    wait_alone $((DEADLINE_S / 2))  # the timing has the GPU to itself while it lasts
    start_plain m-034 --notebooks 04 -p download=false -p releases=0.34.0
    start c-034 --notebooks 04 -p download=false -p upstream_test=false -p 'record_gathers=[]' \
      -p 'variants=["released"]' -p releases=0.34.0
    ;;
  matrix-pinned)
    if [ -d .vllm-cache-pins ]; then export REPRO_VLLM_CACHE=$PWD/.vllm-cache-pins; fi
    # shellcheck disable=SC2086
    pairs=$(PYTHONPATH=$PLAIN_PYTHONPATH "$PY" -m repro_studies.upstream.cutedsl_stack --no-download \
      ${RELEASES:-0.22.0 0.22.1 0.23.0 0.24.0 0.25.0 0.25.1 0.26.0 0.27.0 0.27.1 0.28.0 0.29.0 0.30.0 0.31.0})
    if [ -n "${PAIR:-}" ]; then  # PAIR="CUTLASS QUACK": every release with that stack (rows still name the pins)
      # shellcheck disable=SC2086
      pairs="$PAIR $(echo ${RELEASES:?PAIR needs RELEASES} | tr ' ' ',')"
    fi
    while read -r cutlass quack releases; do
      dirs=$(pinned_site "$cutlass" "$quack")
      if [ -z "$dirs" ] && [ "$PROFILE" = gpu ]; then echo "skipped $releases: CuTe-DSL $cutlass/$quack not installed"; continue; fi
      start_on "$dirs${dirs:+:}$PLAIN_PYTHONPATH" "p-$cutlass-$quack" --notebooks 04 -p download=false \
        -p upstream_test=false -p 'record_gathers=[]' -p 'variants=["released"]' -p releases="$releases"
    done <<<"$pairs"
    ;;
  profile) start profile --notebooks 01 03 -p download=false -p vllm_releases='[0.22.0, 0.33.0]' ;;
  gather) start gather --notebooks 02 ;;
  gather-outside)
    export PYTHONPATH="$PWD/tests/fixtures/implementations:$PYTHONPATH"
    start gather-buggy-pitch --notebooks 02 -p implementation=mutants:buggy_pitch -p sanitizer=off
    start gather-repoint --notebooks 02 -p implementation=mutants:repoint_set -p sanitizer=off
    ;;
  *) echo "STEP: '$STEP' is not a step; accepted: matrix-old, matrix-new, matrix-cutedsl, matrix-034, matrix-pinned, profile, gather, gather-outside" >&2
     exit 2 ;;
esac
while [ "$(jobs -rp | wc -l)" -gt 0 ] && [ $(($(date +%s) - t0)) -lt "$DEADLINE_S" ]; do sleep 2; done
for pid in $(jobs -rp); do kill -TERM "$pid" && echo "stopped run $pid at the ${DEADLINE_S}-s deadline"; done
code=0
for pid in "${pids[@]}"; do wait "$pid" || code=1; done
for log in "$OUT"/*.log; do echo "== $(basename "$log" .log): $(tail -n 1 "$log")"; done
echo "step $STEP finished in $(($(date +%s) - t0)) s"
exit $code
