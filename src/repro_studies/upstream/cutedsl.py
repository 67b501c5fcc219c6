"""vLLM's CuTe-DSL gather of the V4 record as a callable with vLLM's gather signature: the release matrix's own
arm for it (the release's dispatcher with ``has_cutedsl()`` true), for timing beside ``gather_fast``."""

from __future__ import annotations

from typing import Any

from repro.coverage import SentinelMode
from repro_studies.kernel_id import KernelFamily, KernelId
from repro_studies.registry import Form
from repro_studies.upstream.arms import make_callable
from repro_studies.upstream.matrix import MatrixConfig, plan_release
from repro_studies.upstream.release_kernel import ReleaseUnavailable, release_of


def cutedsl_callable(version: str, device: str, download: bool) -> tuple[str, Any, str]:
    """``(release, fn, "")`` for release ``version``'s CuTe-DSL gather of the V4 record, called through the
    release's own dispatcher, or ``(release, None, why not)``; ``release`` is the loaded wheel's version where
    there is one. The arm is the release matrix's own."""
    cfg = MatrixConfig(
        [1], [SentinelMode.IN_RANGE], device=device, interpreted=False, variants=(Form.RELEASED,), download=download
    )
    plan = plan_release(version, cfg)
    if plan.entry is None:
        return version, None, f"{plan.miss.status}: {plan.miss.reason}"
    try:
        release = release_of(plan.entry)
    except ReleaseUnavailable as exc:
        return version, None, str(exc)
    wanted = KernelId.cutedsl(KernelFamily.V4, "v4").matrix_label
    arm = next((a for a in plan.arms if a.kernel == wanted), None)
    if arm is None:
        skipped = next((r for r in plan.skipped if r["kernel"] == wanted), None)
        return release, None, skipped["reason"] if skipped else "this release ships no CuTe-DSL gather"
    try:
        return release, make_callable(arm, interpreted=False), ""
    except Exception as exc:  # vLLM's module or the CuTe-DSL stack failed to import
        return release, None, f"could not load: {type(exc).__name__}: {exc}"[:300]
