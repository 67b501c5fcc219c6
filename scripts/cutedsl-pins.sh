# Sourced by the GPU scripts (through scripts/cutedsl-env.sh): the CuTe-DSL stacks the releases pin, one install per
# pair. scripts/fetch-cutedsl-wheels.py writes a pair's wheels to .cutedsl-pins (any pairs) or .cutedsl-wheels (the
# newest pair, scripts/fetch-cutedsl-wheels.sh); their parts may come over several calls.
# Whatever part of either a call carries is first copied to $CUTEDSL_PINS_STASH (default ~/cutedsl-pins), which
# outlives the working-tree copy while the host stays up; each fetch's SHA256SUMS lines are kept, not replaced.
# `pinned_site CUTLASS QUACK` then joins and checks the pair's wheels, installs them once into
# /tmp/cutedsl-site-CUTLASS-QUACK and prints the PYTHONPATH entries the install adds; it prints nothing, and says why
# on stderr, while a wheel of the pair is missing or corrupt.
PINS_STASH=${CUTEDSL_PINS_STASH:-$HOME/cutedsl-pins}
for carried in .cutedsl-wheels .cutedsl-pins; do
  [ -d "$carried" ] || continue
  mkdir -p "$PINS_STASH"
  for kind in small parts pairs; do
    if [ -d "$carried/$kind" ]; then mkdir -p "$PINS_STASH/$kind" && cp -r "$carried/$kind/." "$PINS_STASH/$kind/"; fi
  done
  if [ -f "$carried/SHA256SUMS" ]; then
    cat "$carried/SHA256SUMS" >>"$PINS_STASH/SHA256SUMS"
    sort -u -o "$PINS_STASH/SHA256SUMS" "$PINS_STASH/SHA256SUMS"
  fi
done

pinned_site() {
  local pair="$1-$2" site="/tmp/cutedsl-site-$1-$2" list="$PINS_STASH/pairs/$1-$2.txt" wheel joined
  if [ ! -d "$site" ]; then
    if [ ! -f "$list" ]; then
      echo "CuTe-DSL $pair: no wheels carried (scripts/fetch-cutedsl-wheels.py)" >&2
      return 0
    fi
    mkdir -p "$PINS_STASH/whole"
    while read -r wheel; do
      joined="$PINS_STASH/whole/$wheel"
      [ -f "$joined" ] && continue
      if [ -f "$PINS_STASH/small/$wheel" ]; then
        cp "$PINS_STASH/small/$wheel" "$joined.tmp"
      elif [ -e "$PINS_STASH/parts/$wheel.part-00" ]; then
        cat "$PINS_STASH/parts/$wheel".part-* > "$joined.tmp"
      else
        echo "CuTe-DSL $pair: $wheel not carried yet" >&2
        return 0
      fi
      # keep a joined wheel only once its hash is the fetched one (a part may still be on its way)
      if echo "$(grep -F "  $wheel" "$PINS_STASH/SHA256SUMS" | cut -d' ' -f1)  $joined.tmp" | sha256sum -c --quiet >&2; then
        mv "$joined.tmp" "$joined"
      else
        rm -f "$joined.tmp"
        echo "CuTe-DSL $pair: $wheel incomplete or corrupt" >&2
        return 0
      fi
    done < "$list"
    sed "s#^#$PINS_STASH/whole/#" "$list" | xargs python3 -m pip install -q --no-index --no-deps --no-cache-dir \
      --target "$site" || { echo "CuTe-DSL $pair: the wheels did not install" >&2; rm -rf "$site"; return 0; }
  fi
  # a --target folder's .pth files (nvidia-cutlass-dsl puts `cutlass` on sys.path through one) are read only by
  # site.addsitedir: keep what it adds
  python3 -c 'import os, site, sys; d = sys.argv[1]; site.addsitedir(d); print(os.pathsep.join(p for p in sys.path if p.startswith(d)))' "$site"
}
