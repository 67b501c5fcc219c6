#!/usr/bin/env bash
# Mermaid's own browser build for tests/test_browser.py, which parses and draws every chart of pr-comment.md with
# it in Chromium, as GitHub draws a comment's mermaid blocks. The pinned release comes from the npm registry
# through npm (checked against its integrity hash); only dist/mermaid.min.js is kept, in $VENV/mermaid/. Without
# npm it says so and that part of the browser test skips (the strict grammar check in the unit tests still runs).
set -uo pipefail
cd "$(dirname "$0")/.."
VERSION=11.17.2
INTEGRITY="sha512-V6K3C8EBdEsPFZXSKMJe6ppQOENxuHARr9GvHX4hh47lAbhMRD9qf4oEK7LoaRQxULMa80/qt5gHO73aCleBBg=="
OUT="${VENV:-.venv}/mermaid"
if [ -f "$OUT/mermaid-$VERSION.min.js" ]; then
  echo "setup: mermaid $VERSION in $OUT"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "setup: no npm; the browser test will not draw pr-comment.md's charts with Mermaid (set REPRO_MERMAID to a" \
       "mermaid.min.js)"
  exit 0
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
if ! (cd "$TMP" && npm pack --silent --json "mermaid@$VERSION" >pack.json 2>npm.log); then
  echo "setup: npm could not fetch mermaid@$VERSION ($(tail -1 "$TMP/npm.log")); the charts will not be drawn"
  exit 0
fi
GOT=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[0]['integrity'])" "$TMP/pack.json")
if [ "$GOT" != "$INTEGRITY" ]; then
  echo "setup: mermaid@$VERSION has integrity $GOT, expected $INTEGRITY; not installed" >&2
  exit 1
fi
mkdir -p "$OUT"
tar -xzf "$TMP/mermaid-$VERSION.tgz" -C "$TMP" package/dist/mermaid.min.js package/LICENSE
mv "$TMP/package/dist/mermaid.min.js" "$OUT/mermaid-$VERSION.min.js"
mv "$TMP/package/LICENSE" "$OUT/LICENSE"
echo "setup: mermaid $VERSION in $OUT"
