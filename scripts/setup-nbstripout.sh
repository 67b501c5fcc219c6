#!/usr/bin/env bash
# Notebooks are committed without outputs. .gitattributes names the `nbstripout` filter for notebooks/*.ipynb;
# this registers it in the checkout's git config, so `git add` of a notebook saved in JupyterLab stores it with
# its outputs and execution counts stripped (cell ids kept), while the working copy keeps what was shown.
# `required`: if the filter cannot run, git refuses to stage the notebook rather than store its outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo "setup: not a git checkout; notebook output filter not registered"
  exit 0
fi
# scripts/nbstripout-filter finds the venv relative to the checkout it runs in, so no path of this machine is stored.
filter="sh scripts/nbstripout-filter"
[ "$VENV" = .venv ] || filter="REPRO_VENV=$VENV $filter"  # a venv elsewhere (conda users) is named once
git config filter.nbstripout.clean "$filter"
git config filter.nbstripout.smudge cat
git config filter.nbstripout.required true
git config diff.ipynb.textconv "$filter -t"
echo "setup: notebook outputs are stripped on git add (filter nbstripout)"
