# Sourced by the GPU scripts: the CuTe-DSL stack the newest releases pin, nvidia-cutlass-dsl 4.8.0 with quack-kernels
# 0.6.5 (scripts/fetch-cutedsl-wheels.sh writes its wheels to .cutedsl-wheels), installed once per host by
# scripts/cutedsl-pins.sh's pinned_site like every other pinned pair and put on PYTHONPATH. CUTEDSL_DIRS holds the
# entries it adds; it is empty, and stderr says why, while a wheel is missing or corrupt: vLLM's CuTe-DSL gather then
# cannot be imported and the callers report it as not run.
. scripts/cutedsl-pins.sh
CUTEDSL_DIRS=$(pinned_site 4.8.0 0.6.5)
if [ -n "$CUTEDSL_DIRS" ]; then
  export PYTHONPATH="$CUTEDSL_DIRS${PYTHONPATH:+:$PYTHONPATH}"
fi
