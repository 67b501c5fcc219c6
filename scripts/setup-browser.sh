#!/usr/bin/env bash
# A Chromium for tests/test_browser.py, which drives it through Playwright (Playwright's own browser download
# is not used). Keeps one already on PATH; else installs the distribution's chromium with apt where this user
# may (root, or sudo without a password). Where it cannot, it says why and the browser test skips saying so.
set -uo pipefail
for b in chromium chromium-browser google-chrome google-chrome-stable; do
  if command -v "$b" >/dev/null 2>&1; then
    echo "setup: browser $(command -v "$b")"
    exit 0
  fi
done
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: no Chromium on PATH and no apt-get; the browser test will skip (set REPRO_CHROMIUM to a Chromium)"
  exit 0
fi
SUDO=()
if [ "$(id -u)" != 0 ]; then
  if sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
  else
    echo "setup: no Chromium on PATH and apt-get needs root here; the browser test will skip" \
         "(install chromium, or set REPRO_CHROMIUM to a Chromium)"
    exit 0
  fi
fi
echo "setup: installing chromium with apt-get"
if ! { "${SUDO[@]}" apt-get update -qq && DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq chromium; }; then
  echo "setup: apt-get could not install chromium; the browser test will skip"
fi
exit 0
