"""The studies' run-folder names, defined once: notebooks 03-06, their result tables (with their identity columns),
facts files and figures; registered with ``repro`` (:class:`repro.tables.Names`, entry point ``tables`` of
:mod:`repro.plugins`) so that its ledger, comparison and test plan know them."""

from __future__ import annotations

from enum import StrEnum

from repro.tables import Names, TableName


class Notebook(StrEnum):
    """A study notebook of ``notebooks/``, by file stem."""

    PERFORMANCE = "03-performance"
    RELEASES = "04-upstream-releases"
    AFFECTED = "05-who-is-affected"
    RESHAPE_RELEASES = "06-reshape-in-releases"


class Table(TableName):
    """The studies' result tables, ``results/<value>.csv``."""

    # notebook 03: the fix's cost on this repository's kernels
    PERF_CHECKS = "03-performance-checks", ("check", "variant", "seq_len", "num_reqs")
    PERF_MEDIANS = "03-performance-medians", ("arm", "code", "launch", "seq_len", "num_reqs")
    PERF_RATIOS = "03-performance-ratios", ("launch", "seq_len", "num_reqs")
    # notebook 03: the streaming ceiling
    CEILING = "03-performance-ceiling", ("arm", "launch", "table", "requests", "seq_len", "num_reqs")
    CEILING_CHECKS = "03-performance-ceiling-checks", ("check", "variant", "seq_len", "num_reqs")
    DECOMPOSITION = "03-performance-decomposition", ("arm", "launch", "table", "requests", "seq_len", "num_reqs")
    VS_CEILING = "03-performance-vs-ceiling", ("arm", "launch", "table", "requests", "seq_len", "num_reqs")
    GAP = "03-performance-gap", ("step", "seq_len", "num_reqs")
    # notebook 03: Triton's JIT
    JIT = "03-jit-fingerprint", ("code", "variant", "table", "phase", "call")
    JIT_SUMMARY = "03-jit-summary", ("variant", "table")
    JIT_CHECKS = "03-jit-checks", ("check", "variant", "table", "pitch", "num_reqs")
    # notebook 03: vLLM's own kernel, per release
    VLLM_LOADS = "03-vllm-loads", ("check", "variant", "release", "code", "kernel")
    VLLM_CHECKS = "03-vllm-checks", ("check", "variant", "code", "seq_len", "num_reqs")
    VLLM_MEDIANS = "03-vllm-medians", ("arm", "code", "launch", "seq_len", "num_reqs")
    VLLM_RATIOS = "03-vllm-ratios", ("code", "launch", "seq_len", "num_reqs")
    # notebook 03: vLLM's CuTe-DSL gather
    CUTEDSL = "03-cutedsl", ("code",)
    CUTEDSL_CHECKS = "03-cutedsl-checks", ("check", "variant", "code", "seq_len", "num_reqs")
    CUTEDSL_MEDIANS = "03-cutedsl-medians", ("arm", "code", "launch", "seq_len", "num_reqs")
    CUTEDSL_VS_FAST = "03-cutedsl-vs-fast", ("code", "launch", "seq_len", "num_reqs")
    # notebook 03: what vLLM's production path pays per call (the model's call sites, its graph defaults)
    PRODUCTION_PATH = "03-vllm-production-path", ("release", "module", "function", "line")
    PRODUCTION_SUMMARY = "03-vllm-production-summary", ("release", "module", "function")
    #: Host and device time per eager call of every timed arm.
    EAGER_COSTS = "03-eager-costs", ("arm", "code", "seq_len", "num_reqs")
    # notebook 03: the V4.1 records (528-B MXFP8, 288-B NVFP4), the repository's gathers beside vLLM's
    V41_LOADS = "03-v41-loads", ("release", "record")
    V41_CHECKS = "03-v41-checks", ("check", "variant", "release", "record", "layout", "shape", "num_reqs")
    V41_MEDIANS = "03-v41-medians", ("arm", "kind", "layout", "launch", "seq_len", "num_reqs")
    V41_VS_COPY = "03-v41-vs-copy", ("arm", "kind", "layout", "seq_len", "num_reqs")
    # notebook 04: every release
    #: ``run``: in a merge of several runs' matrices, the run a row comes from.
    RELEASE_MATRIX = (
        "04-release-matrix",
        ("run", "release", "kernel", "record", "layout", "variant", "mode", "num_reqs"),
    )
    RELEASE_INDEX = "04-release-index", ("release",)
    KERNEL_INVENTORY = "04-kernel-inventory", ("release", "kernel", "record", "layout")
    RELEASE_CHECKS = "04-release-checks", ("check", "release", "kernel", "variant", "num_reqs")
    WRITER_CHECKS = "04-writer-checks", ("check", "release", "layout", "variant", "num_reqs")
    #: vLLM's regression test (``upstream-tests/``) per release, as released and with the release's patch.
    PATCHES = "04-patches", ("release",)
    UPSTREAM_TEST = "04-upstream-test", ("release", "form", "test")
    UPSTREAM_TEST_SUMMARY = "04-upstream-test-summary", ("release", "form")
    #: The repository's V4.1 gathers as implementations under test on each release's records.
    RECORD_GATHERS = "04-record-gathers", ("release", "kernel", "record", "layout", "variant", "mode", "num_reqs")
    RECORD_GATHER_CHECKS = "04-record-gather-checks", ("check", "release", "variant", "record")
    # notebook 05: who is affected, from each release's own code
    GATHER_DISPATCH = "05-gather-dispatch", ("release", "gpu_family", "model", "record", "topology")
    GATHER_WARMUPS = "05-gather-warmups", ("release", "gpu_family", "model", "topology", "instance")
    RUNNER_TABLES = "05-runner-tables", ("release", "runner", "config", "group", "stage", "site")
    RUNNER_ANSWERS = "05-runner-answers", ("release", "runner")
    WHO_IS_AFFECTED = "05-who-is-affected", ("releases", "gpu_family", "model", "record", "topology")
    # notebook 06: bug 1 in each release, its own chain per runner and block size
    #: One row per release x runner: its reshape, how it counts kernel blocks, which runner a stock user gets.
    BUG1_RUNNERS = "06-reshape-runners", ("release", "runner")
    #: One row per release x runner x block size: where the engine stopped, or its reshape's first error.
    BUG1_RUNS = "06-reshape-runs", ("release", "runner", "block size asked")
    #: One row per release x runner x block size x cache layer: the layer's view, or its error.
    BUG1_CELLS = "06-reshape-cells", ("release", "runner", "block size asked", "layer")
    #: One row per release x runner: reached (with the configuration), latent, absent, not shipped.
    BUG1_ANSWERS = "06-reshape-answers", ("release", "runner")
    BUG1_CHECKS = "06-reshape-checks", ("check", "release", "runner", "block size asked", "layer")
    #: The repository's model of PR #43988's unreleased code state at the PR's geometry (never a release).
    BUG1_MODEL = "06-reshape-model", ("code", "variant", "cache group")
    #: Written by ``repro report --merge`` beside the merged matrix (a merge folder, not a run folder).
    RELEASE_VERDICTS = "04-release-verdicts", ("release", "kernel", "variant")


class Facts(StrEnum):
    """A study's facts file, ``results/<value>.json``."""

    PERFORMANCE = "03-performance"
    CEILING = "03-performance-ceiling"
    JIT = "03-jit"
    VLLM = "03-vllm"
    VLLM_COST = "03-vllm-cost"
    VLLM_JIT = "03-vllm-jit"
    CUTEDSL = "03-cutedsl"
    PRODUCTION_PATH = "03-vllm-production-path"
    EAGER_COSTS = "03-eager-costs"
    V41 = "03-v41"


class Plot(StrEnum):
    """A study's figure of the report, ``plots/<value>.png``."""

    TIME_GRAPH = "03-time-graph"
    BANDWIDTH = "03-bandwidth-fraction"
    TIME_EAGER = "03-time-eager"
    CEILING = "03-ceiling-fraction"
    JIT = "03-jit-fingerprint"
    #: One figure per tokens per request: ``03-vllm-time-graph-<seq_len>``.
    VLLM_TIME = "03-vllm-time-graph"
    VLLM_RATIOS = "03-vllm-ratios"
    VLLM_JIT = "03-jit-fingerprint-vllm"
    RELEASE_MATRIX = "04-release-matrix"


NAMES = Names(
    notebooks=Notebook,
    tables=Table,
    facts=Facts,
    gather_tables=(
        Table.PERF_MEDIANS,
        Table.VLLM_RATIOS,
        Table.RELEASE_MATRIX,
        Table.UPSTREAM_TEST_SUMMARY,
        Table.GATHER_DISPATCH,
    ),
)
