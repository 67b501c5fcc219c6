"""Bug 1 on vLLM's own function: the analysis rules on hand-made rows, and one real release on the CPU."""

import json

import pandas as pd
import pytest

from repro import seeds
from repro.analysis import reshape_releases as rules
from repro.registry import (
    KBS_NOT_A_PARAMETER,
    KBS_SELECTED,
    KBS_STORAGE,
    OUTCOME_RAISED,
    OUTCOME_VIEW,
    RESHAPE_NO_FUNCTION,
    RESHAPE_NOT_LOADED,
    RESHAPE_RAN,
    RESHAPE_SELECTION_NOT_RUN,
)

SEED = seeds.load(43988)
PR_ERROR = (
    "setStorage: sizes [3944832, 2, 584], strides [1728, 584, 1], storage offset 0, and itemsize 1 requiring a "
    "storage size of 6816669136 are out of bounds for storage of size 53255232 (at vllm/v1/worker/gpu/x.py:1)"
)


def row(**changes):
    """A C128A row at the PR's geometry that returned the fixed view (every figure as the model says)."""
    base = {
        "code": "vLLM 0.99.0",
        "release": "0.99.0",
        "cache group": "C128A KV",
        "kbs input": KBS_SELECTED,
        "kernel_block_size": 256,
        "kbs chosen by": "vLLM 0.99.0 prepare_kernel_block_sizes",
        "storage_block_size": 2,
        "pr_geometry": True,
        "status": RESHAPE_RAN,
        "reason": "",
        "count expression": "x.storage_block_size // kernel_block_size",
        "outcome": OUTCOME_VIEW,
        "error_type": "",
        "error": "",
        "sizes": json.dumps([30819, 2, 584]),
        "strides": json.dumps([1728, 584, 1]),
        "required_bytes": 53254672,
        "available_bytes": 53255232,
        "unused_tail_bytes": 560,
        "page_tail_bytes": 560,
        "payload_mismatches": 0,
        "padding_bytes_changed": 0,
        "spec_page_bytes": 1728,
        "spec_real_page_bytes": 1168,
        "model_page_bytes": 1728,
        "model_real_page_bytes": 1168,
        "model_buggy_sizes": json.dumps([3944832, 2, 584]),
        "model_buggy_strides": json.dumps([1728, 584, 1]),
        "model_buggy_required": 6816669136,
        "model_fixed_sizes": json.dumps([30819, 2, 584]),
        "model_fixed_strides": json.dumps([1728, 584, 1]),
        "model_fixed_required": 53254672,
    }
    return {**base, **changes}


def raised(**changes):
    """The same row where the release raised PyTorch's error with the PR's figures."""
    fields = {
        "outcome": OUTCOME_RAISED,
        "error_type": "RuntimeError",
        "error": PR_ERROR,
        "sizes": "",
        "strides": "",
        "required_bytes": None,
        "unused_tail_bytes": None,
        "payload_mismatches": None,
        "padding_bytes_changed": None,
        "kbs input": KBS_STORAGE,
        "kernel_block_size": 2,
        "kbs chosen by": "storage rows",
    }
    return row(**{**fields, **changes})


def oks(checks):
    return {c["check"]: c["ok"] for c in checks}


def test_a_fitting_view_passes_only_when_every_figure_and_byte_is_right():
    good = rules.observation_checks(row()) + rules.pr_figure_checks(row(), SEED)
    assert all(c["ok"] for c in good) and len(good) == 7
    assert {c["code"] for c in good} == {"vLLM 0.99.0"}
    assert not oks(rules.observation_checks(row(payload_mismatches=3)))[
        "the view aliases exactly the right bytes (written through the view, read from the raw pool)"
    ]
    assert not oks(rules.observation_checks(row(unused_tail_bytes=0)))["unused tail is the last page's padding"]
    wrong_view = row(sizes=json.dumps([30819, 2, 512]), strides=json.dumps([1728, 512, 1]))
    assert not oks(rules.observation_checks(wrong_view))["returns the fixed model's view"]
    assert not oks(rules.observation_checks(row(spec_page_bytes=1168)))[
        "the release's spec class computes the catalogue's page"
    ]
    assert not rules.pr_figure_checks(row(required_bytes=53254671), SEED)[0]["ok"]


def test_a_raise_passes_only_as_pytorchs_setstorage_error_with_the_buggy_figures():
    checks = rules.observation_checks(raised()) + rules.pr_figure_checks(raised(), SEED)
    assert all(c["ok"] for c in checks) and len(checks) == 7
    # another kind of error is a failed check, not a pass
    for error_type, text in [
        ("OutOfMemoryError", "CUDA out of memory"),
        ("RuntimeError", "shape '[3944832, 2, 584]' is invalid for input of size 53255232"),
        ("AssertionError", ""),
    ]:
        bad = raised(error_type=error_type, error=text)
        assert not oks(rules.observation_checks(bad))[
            "raises PyTorch's setStorage error with the buggy model's figures"
        ]
        assert not any(c["ok"] for c in rules.pr_figure_checks(bad, SEED))
    other_figures = raised(error=PR_ERROR.replace("6816669136", "6816669137"))
    assert not all(c["ok"] for c in rules.pr_figure_checks(other_figures, SEED))


def test_rows_that_did_not_run_are_findings_or_failures():
    finding = rules.observation_checks(row(status=RESHAPE_NO_FUNCTION, reason="no def"))
    assert [c["ok"] for c in finding] == [True]
    failure = rules.observation_checks(row(status=RESHAPE_NOT_LOADED, reason="could not load: vllm.x"))
    assert [c["ok"] for c in failure] == [False] and "vllm.x" in failure[0]["observed"]


def test_verdicts_per_release_come_from_the_rows():
    frame = pd.DataFrame(
        [
            row(),
            raised(),
            row(code="vLLM 0.98.0", release="0.98.0"),
            row(code="vLLM 0.98.0", release="0.98.0", **{"kbs input": KBS_STORAGE}),
            row(code="vLLM 0.97.0", release="0.97.0", status=RESHAPE_NO_FUNCTION, reason="defines no function"),
            raised(code="vLLM 0.96.0", release="0.96.0", error_type="MemoryError", error="no memory"),
        ]
    )
    v = rules.release_verdicts(frame).set_index("release")
    assert v.loc["0.99.0", "verdict"] == "bug 1: overruns"
    assert (v.loc["0.99.0", "overruns with"], v.loc["0.99.0", "fits with"]) == (KBS_STORAGE, KBS_SELECTED)
    assert v.loc["0.99.0", "stock runner's selection"] == "fits (vLLM 0.99.0 prepare_kernel_block_sizes)"
    assert v.loc["0.98.0", "verdict"] == "fits"
    assert v.loc["0.97.0", "verdict"] == RESHAPE_NO_FUNCTION
    assert v.loc["0.96.0", "verdict"] == "does what neither model variant does"
    sentence = rules.verdict_sentence(rules.release_verdicts(frame))
    assert "vLLM 0.99.0: bug 1 (overruns with the storage rows kernel block size; with the release's own runner " in (
        sentence
    )
    assert "vLLM 0.98.0: every group fits" in sentence


SOURCE = "the kernel block size came from the code the row names"


def test_a_kernel_block_size_that_did_not_come_from_the_release_fails():
    assert oks(rules.observation_checks(row()))[SOURCE] and oks(rules.observation_checks(raised()))[SOURCE]
    # the model (or nobody, or another release) named as the chooser of the release's selection
    for chooser in ("model", "", "vLLM 0.98.0 prepare_kernel_block_sizes"):
        assert not oks(rules.observation_checks(row(**{"kbs chosen by": chooser})))[SOURCE], chooser
    assert not oks(rules.observation_checks(row(kernel_block_size=None)))[SOURCE]
    # the storage-rows input must be the storage rows; "not a parameter" must hand in nothing
    assert not oks(rules.observation_checks(raised(kernel_block_size=256)))[SOURCE]
    assert not oks(rules.observation_checks(row(**{"kbs input": KBS_NOT_A_PARAMETER})))[SOURCE]
    assert oks(rules.observation_checks(row(**{"kbs input": KBS_NOT_A_PARAMETER, "kernel_block_size": None})))[SOURCE]
    # a selection that did not run is a failed row, never a value from elsewhere
    not_run = row(status=RESHAPE_SELECTION_NOT_RUN, reason="not run: could not load", kernel_block_size=None)
    assert not any(c["ok"] for c in rules.observation_checks(not_run))


def test_the_runner_selection_is_found_in_the_release_source_and_unknown_modules_are_placeholders():
    from repro.upstream import kernel_blocks

    source = (
        "from vllm.v1.worker.utils import bind_kv_cache, prepare_kernel_block_sizes\n"
        "def init_attn_backend(kv_cache_config, attn_groups):\n"
        "    kernel_block_sizes = prepare_kernel_block_sizes(kv_cache_config, attn_groups)\n"
        "    return kernel_block_sizes\n"
    )
    assert kernel_blocks.runner_selection_call(source) == ("prepare_kernel_block_sizes", "vllm.v1.worker.utils")
    assert kernel_blocks.runner_selection_call("def f():\n    return 1\n") == ("", "")
    stubs = kernel_blocks.PlaceholderStubs({"vllm.v1.worker.utils", "vllm.v1.attention.backend"})
    assert "vllm.config" in stubs and stubs["vllm.config"] == kernel_blocks.PLACEHOLDER_MODULE
    # a cached module, and the packages above it, are never stubbed
    assert "vllm.v1.worker.utils" not in stubs and "vllm.v1.worker" not in stubs and "vllm" not in stubs
    assert "vllm.platforms" in stubs and stubs["vllm.platforms"] == kernel_blocks.SELECTION_STUBS["vllm.platforms"]


def test_verdicts_read_rows_back_from_csv(tmp_path):
    path = tmp_path / "rows.csv"
    pd.DataFrame([row(), raised()]).to_csv(path, index=False)
    frame = pd.read_csv(path, keep_default_na=False)
    checks = rules.release_checks(frame, SEED, "C128A KV")
    assert len(checks) == 14 and all(c["ok"] for c in checks)


@pytest.mark.integration
def test_one_real_release_raises_the_prs_error_and_fits_with_its_own_runner_selection(tmp_path, monkeypatch):
    import torch

    import repro.geometry.specs
    from repro.geometry.specs import dsv4_catalogue
    from repro.upstream import kernel_blocks
    from repro.upstream import reshape as vllm_reshape
    from repro.upstream.releases import fetch_index

    try:
        fetch_index(timeout_s=20)
    except OSError as exc:
        pytest.skip(f"the registry is not reachable here ({type(exc).__name__})")
    loaded = vllm_reshape.load_release("0.22.0", tmp_path)
    assert loaded.status == RESHAPE_RAN, loaded.reason
    assert vllm_reshape.blocks_per_kv_block_lines(loaded.source()) == [
        "num_blocks *= kv_cache_spec.block_size // kernel_block_size"
    ]
    assert [c.expression for c in vllm_reshape.count_sites(loaded.source())] == [
        "kv_cache_spec.block_size // kernel_block_size"
    ]
    assert len(vllm_reshape.as_strided_sites(loaded.source())) == 2  # the padded attention view and Mamba's
    # The model's kernel block size is made wrong: a release row that still carried it would fail below.
    for module in (repro.geometry.specs, vllm_reshape):
        monkeypatch.setattr(module, "group_kernel_block_size", lambda spec: 7)
    specs = dsv4_catalogue(256)
    selection = kernel_blocks.select_for_release("0.22.0", specs, vllm_reshape.build_spec, tmp_path)
    assert not selection.reason, selection.reason
    assert selection.function == "prepare_kernel_block_sizes"
    assert {"prepare_kernel_block_sizes", "select_common_block_size"} <= set(selection.calls)
    assert "DeepseekV4FlashMLASparseBackend.get_supported_kernel_block_sizes" in selection.calls
    spec = next(s for s in specs if s.name == "C128A KV")
    chosen = selection.group(spec.name)
    assert (chosen.kernel_block_size, chosen.declared) == (256, "[256]")
    pool = torch.empty(SEED["reported"]["available_bytes"], dtype=torch.uint8)
    inputs = vllm_reshape.kernel_block_inputs(loaded, spec, selection)
    rows = [vllm_reshape.observe(loaded, spec, pool, kbs, True) for kbs in inputs]
    assert [(r["kbs input"], r["kernel_block_size"], r["model kernel_block_size"]) for r in rows] == [
        (KBS_SELECTED, 256, 7),
        (KBS_STORAGE, 2, 7),
    ]
    assert rows[0]["kbs chosen by"] == "vLLM 0.22.0 prepare_kernel_block_sizes"
    assert [r["outcome"] for r in rows] == [OUTCOME_VIEW, OUTCOME_RAISED]
    checks = rules.release_checks(pd.DataFrame(rows), SEED, "C128A KV")
    assert all(c["ok"] for c in checks), [c for c in checks if not c["ok"]]
    verdicts = rules.release_verdicts(pd.DataFrame(rows))
    assert verdicts["verdict"].tolist() == ["bug 1: overruns"]
    assert verdicts["stock runner's selection"].tolist() == ["fits (vLLM 0.22.0 prepare_kernel_block_sizes)"]


def test_a_bad_release_selection_stops_at_the_parameters_naming_it():
    from repro.parameters import ParameterError, validate_notebook
    from repro.walkthrough.reshape import resolve_reshape_releases

    for bad in ("latest", "0.22.x", "0.22.0,v0.23.0"):
        with pytest.raises(ParameterError, match=r"^reshape_releases: "):
            validate_notebook({"reshape_releases": bad}, "cpu")
    assert resolve_reshape_releases("default", "cpu", True) == ["0.22.0", "0.23.0"]
    assert resolve_reshape_releases("default", "gpu", True) == []
    assert resolve_reshape_releases("none", "cpu", True) == []
    assert resolve_reshape_releases("0.23.0, 0.22.0,0.23.0", "cpu", True) == ["0.23.0", "0.22.0"]
    with pytest.raises(ParameterError, match=r"^reshape_releases: 'all' needs the registry and download is false"):
        resolve_reshape_releases("all", "cpu", False)
