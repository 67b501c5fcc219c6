"""A pytest plugin that makes ``import vllm...`` mean one release's own modules, for a test file written for
vLLM's suite (``python -m pytest FILE -p repro_studies.upstream.pytest_release``, started by
:mod:`repro_studies.upstream.regression`, which sets the environment below).

For the whole session the release's cached modules are importable through the loader of
:mod:`repro_studies.upstream.loader` (as released, or with the files of a patched copy standing in for the
modules they replace); in Triton's interpreter every test also runs inside the bounds-checked
interpreter, which counts the lanes a kernel aims outside every argument instead of letting them
crash the process. The cases a run takes are chosen by parameter value (:class:`Selection`, from
``$REPRO_UPSTREAM_SELECT``): the test file itself has no size switch. Each collected test, each phase's
outcome and the exception behind a failure are written as JSON lines to ``$REPRO_UPSTREAM_OUTCOMES``; a
GPU fault (which poisons the CUDA context) stops the session so the runner can go on in a fresh process.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from repro.outcomes import device_fault
from repro_studies.registry import Form
from repro_studies.upstream.loader import LoadedRelease
from repro_studies.upstream.members import GATHER
from repro_studies.upstream.wheelcache import load_entry

ENV_RELEASE = "REPRO_UPSTREAM_RELEASE"
ENV_CACHE = "REPRO_UPSTREAM_CACHE"
ENV_FILES = "REPRO_UPSTREAM_FILES"  # root of a patched copy ("" or unset: as released)
ENV_TAG = "REPRO_UPSTREAM_TAG"
ENV_OUTCOMES = "REPRO_UPSTREAM_OUTCOMES"
ENV_SELECT = "REPRO_UPSTREAM_SELECT"  # a Selection as JSON ("" or unset: every case)


@dataclass(frozen=True)
class Selection:
    """Which cases of the test file a run takes, by parameter value: ``every`` constrains every test,
    ``per_test`` the test function it names; a parameter a constraint does not name, or that a test does not
    take, admits every value."""

    every: Mapping[str, tuple] = field(default_factory=dict)
    per_test: Mapping[str, Mapping[str, tuple]] = field(default_factory=dict)

    def takes(self, function: str, params: Mapping[str, object]) -> bool:
        wanted = {**self.every, **self.per_test.get(function, {})}
        return all(params[name] in values for name, values in wanted.items() if name in params)

    def to_json(self) -> str:
        return json.dumps({"every": self.every, "per_test": self.per_test})

    @classmethod
    def from_json(cls, text: str) -> Selection:
        data = json.loads(text) if text else {}
        every = {k: tuple(v) for k, v in data.get("every", {}).items()}
        per_test = {t: {k: tuple(v) for k, v in c.items()} for t, c in data.get("per_test", {}).items()}
        return cls(every, per_test)


_state: dict = {}


def _write(event: dict) -> None:
    with open(os.environ[ENV_OUTCOMES], "a") as fh:
        fh.write(json.dumps(event, default=str) + "\n")


def _interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def pytest_configure(config: pytest.Config) -> None:

    version = os.environ[ENV_RELEASE]
    root = os.environ.get(ENV_CACHE) or None
    entry = load_entry(version, Path(root) if root else None)
    if entry is None:
        raise pytest.UsageError(f"vLLM {version} is not in the cache {root or '(default)'}")
    overrides = {}
    files = os.environ.get(ENV_FILES)
    if files:
        for member in entry.members_of(GATHER):
            text = (Path(files) / member).read_text()
            if text != entry.read(member):
                overrides[member] = text
    release = LoadedRelease(entry, overrides, tag=os.environ.get(ENV_TAG) or Form.RELEASED)
    stack = contextlib.ExitStack()
    stack.enter_context(release.active())
    if _interpreted():
        from repro_studies.upstream.interp_compat import (
            loaded_scalar_loop_bounds,  # lazy: patches Triton's interpreter, only when the test runs in it
        )

        stack.enter_context(loaded_scalar_loop_bounds())
    _state.update(stack=stack, release=release)
    _write({"event": "loaded", **release.provenance()})


def pytest_unconfigure(config: pytest.Config) -> None:
    stack = _state.pop("stack", None)
    if stack is not None:
        release = _state.pop("release")
        _write({"event": "stubs", "stubs": sorted(release.stubs_used), "helpers": sorted(release.helpers_used)})
        stack.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the cases the selection takes (the others are deselected, as ``-k`` would) and record each."""
    selection = Selection.from_json(os.environ.get(ENV_SELECT, ""))
    kept, dropped = [], []
    for item in items:
        spec = getattr(item, "callspec", None)
        params = dict(spec.params) if spec else {}
        function = getattr(item, "originalname", item.name)
        (kept if selection.takes(function, params) else dropped).append((item, params))
    if dropped:
        config.hook.pytest_deselected(items=[item for item, _ in dropped])
        items[:] = [item for item, _ in kept]
    for item, params in kept:
        _write({"event": "collected", "nodeid": item.nodeid, "params": params})


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _write({"event": "collect-error", "nodeid": report.nodeid, "message": str(report.longrepr)[-2000:]})


def pytest_runtest_logstart(nodeid: str, location: tuple) -> None:
    _write({"event": "start", "nodeid": nodeid})


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    if not _interpreted():
        return (yield)
    from repro.core.evidence.checked_interp import (
        checked_interpreter,  # lazy: patches Triton's interpreter, only when the test runs in it
    )

    with checked_interpreter() as report:
        try:
            return (yield)
        finally:
            item.stash[_LANES] = (report.out_of_view_lanes, report.out_of_bounds_lanes)


_LANES = pytest.StashKey[tuple[int, int]]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    exc = call.excinfo
    message = ""
    if exc is not None and not report.skipped:
        message = f"{exc.typename}: {exc.value}"
    elif report.skipped and isinstance(report.longrepr, tuple):
        message = str(report.longrepr[2])
    out_of_view, out_of_bounds = item.stash.get(_LANES, (0, 0)) if call.when == "call" else (0, 0)
    fault = exc is not None and device_fault(message) is not None
    _write(
        {
            "event": "result",
            "nodeid": item.nodeid,
            "when": call.when,
            "outcome": report.outcome,
            "exception": exc.typename if exc is not None and not report.skipped else "",
            "message": message[:2000],
            "fault": fault,
            "out_of_view_lanes": out_of_view,
            "out_of_bounds_lanes": out_of_bounds,
            "seconds": round(call.duration, 4),
            "at": time.time(),
        }
    )
    if fault:
        item.session.shouldstop = f"{item.nodeid}: the device faulted; the CUDA context is lost"
    return report
