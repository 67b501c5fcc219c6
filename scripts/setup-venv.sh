#!/usr/bin/env bash
# Create .venv and install the project with its dev extra; register the notebook output filter.
# Without a CUDA GPU: torch/triton come from constraints-cpu.txt (CPU torch, no multi-GB CUDA pull), installed by
# uv (the same resolution as pip's, in seconds rather than a minute; pip where uv cannot be had).
# With one: the venv sees the system's torch/triton pairing and pip installs nothing over it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

# uv reads no pip configuration: the indexes, find-links and constraints pip would use here (its config files and
# PIP_* variables, e.g. CI's PyTorch CPU index) are passed to it, and it picks the best version across all of
# them as pip does.
uv_options() {
  "$VENV/bin/pip" config list 2>/dev/null | "$VENV/bin/python" -c '
import ast, sys
options = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
           "constraint": "--constraint"}
rank = {"global": 0, "install": 1, ":env:": 2}  # a PIP_* variable over the files, as pip has it
chosen = {}
for line in sys.stdin:
    key, _, value = line.strip().partition("=")
    section, _, name = key.rpartition(".")
    if name in options and section in rank and rank[section] >= chosen.get(name, (-1,))[0]:
        chosen[name] = (rank[section], ast.literal_eval(value).split())
print("\n".join(f"{options[name]}\n{value}" for name, (_, values) in chosen.items() for value in values))'
}

uv_install() {
  local uv
  uv=$(command -v uv || true)
  if [ -z "$uv" ] && "$VENV/bin/pip" install -q uv >/dev/null 2>&1; then
    uv="$VENV/bin/uv"
  fi
  [ -n "$uv" ] || return 1
  local -a extra
  mapfile -t extra < <(uv_options)
  # --compile-bytecode: as pip does, so that no process pays for compiling torch's modules (where
  # PYTHONDONTWRITEBYTECODE is set, every process would)
  "$uv" pip install -q --compile-bytecode --python "$VENV/bin/python" --index-strategy unsafe-best-match "${extra[@]}" "$@"
}

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 \
   && "$PYTHON" -c 'import torch, triton, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "setup: CUDA GPU found; keeping the system's torch $("$PYTHON" -c 'import torch; print(torch.__version__)')"
  "$PYTHON" -m venv --system-site-packages "$VENV"
  "$VENV/bin/pip" install -q -e '.[dev]'
else
  echo "setup: no CUDA GPU; installing CPU torch/triton pinned by constraints-cpu.txt"
  "$PYTHON" -m venv "$VENV"
  if ! uv_install -c constraints-cpu.txt -e '.[dev]'; then
    echo "setup: uv is not available here; installing with pip"
    "$VENV/bin/pip" install -q -c constraints-cpu.txt -e '.[dev]'
  fi
fi
# rfc3987-syntax (jsonschema's optional check of the 'iri' formats, which jupyter-events asks for) builds a parser at
# import: a second in every process that imports nbformat, so in every notebook run. Nothing here validates an IRI.
"$VENV/bin/pip" uninstall -q -y rfc3987-syntax 2>/dev/null || true
"$VENV/bin/pip" check
VENV="$VENV" scripts/setup-nbstripout.sh
