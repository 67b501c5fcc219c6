# Sourced by the GPU scripts: install the carried CuTe-DSL wheels once per host and put them on PYTHONPATH.
# Whatever part of .cutedsl-wheels (scripts/fetch-cutedsl-wheels.sh) this call carries is first copied to
# $CUTEDSL_STASH (default ~/cutedsl), which outlives the working-tree copy while the host stays up; once the stash
# holds every part and SHA256SUMS, the wheels are joined, checked and installed into $CUTEDSL_SITE. Without them
# vLLM's CuTe-DSL gather cannot be imported, and the callers report it as not run.
STASH=${CUTEDSL_STASH:-$HOME/cutedsl}
CSITE=${CUTEDSL_SITE:-/tmp/cutedsl-site}
if [ -d .cutedsl-wheels ]; then
  mkdir -p "$STASH" && cp -r .cutedsl-wheels/. "$STASH/"
fi
if [ -f "$STASH/SHA256SUMS" ] && [ ! -d "$CSITE" ]; then
  mkdir -p "$STASH/whole"
  cp "$STASH"/small/*.whl "$STASH/whole/"
  for first in "$STASH"/parts/*.part-00; do
    [ -e "$first" ] || continue
    wheel=$(basename "${first%.part-00}")
    cat "$STASH/parts/$wheel".part-* > "$STASH/whole/$wheel"
  done
  if (cd "$STASH/whole" && sha256sum -c ../SHA256SUMS); then
    python3 -m pip install -q --no-index --no-deps --no-cache-dir --target "$CSITE" "$STASH"/whole/*.whl \
      || { echo "CuTe-DSL wheels did not install; the CuTe-DSL rows will say not run" >&2; rm -rf "$CSITE"; }
  else
    echo "CuTe-DSL wheels incomplete or corrupt in $STASH; the CuTe-DSL rows will say not run" >&2
  fi
fi
if [ -d "$CSITE" ]; then
  # A --target folder on PYTHONPATH is not a site dir: its .pth files (nvidia-cutlass-dsl puts its `cutlass`
  # package on sys.path through one) are not read. Let site.addsitedir read them and keep what they add.
  dirs=$(python3 -c 'import os, site, sys; d = sys.argv[1]; site.addsitedir(d); print(os.pathsep.join(p for p in sys.path if p.startswith(d)))' "$CSITE")
  export PYTHONPATH="$dirs${PYTHONPATH:+:$PYTHONPATH}"
fi
