"""How ``make test`` spreads the suite over pytest-xdist workers (``--dist loadgroup``, see tests/conftest.py), and
work made once per session whichever worker asks for it first (:func:`made_once`).

One test at a time goes to whichever worker is free, in the order conftest.py gives (longest first), so that
the workers end together; the tests that carry an ``xdist_group`` mark go to one worker together, which then
makes their module's shared fixture once. conftest.py marks every test that uses a module- or session-scoped
fixture of its own module.

pytest-xdist's own ``loadgroup`` reads the marks through a suffix it writes into each test's id, which pytest 9
no longer lets a plugin change; here each worker writes the groups it found to a file in the session's folder
and the scheduler in the controller reads it once every worker has collected.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

GROUPS_FILE = "xdist-groups.json"


def session_root(config: pytest.Config) -> Path:
    """The session's temporary folder, shared by the controller and every worker (each worker's is inside)."""
    root = config._tmp_path_factory.getbasetemp()
    return root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root


def made_once(config: pytest.Config, name: str, make: Callable[[Path], dict]) -> dict:
    """``make(folder)``'s record (JSON), made once in the test session: the first to ask makes it under a file lock,
    in a folder of its own in the session's folder; every later caller, on any worker, reads it back."""
    root = session_root(config)
    record = root / f"{name}.json"
    with FileLock(str(root / f"{name}.lock")):
        if not record.exists():
            folder = root / name
            folder.mkdir(parents=True, exist_ok=True)
            record.write_text(json.dumps(make(folder)))
        return json.loads(record.read_text())


def group_of(item: pytest.Item) -> str | None:
    """The test's group, as pytest-xdist names it: its ``xdist_group`` marks' names, joined."""
    marks = item.iter_markers("xdist_group")
    return "_".join(sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks})) or None


def write_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a worker: every grouped test's id and group, for the controller's scheduler."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    groups = {item.nodeid: group for item in items if (group := group_of(item)) is not None}
    path = session_root(config) / GROUPS_FILE
    part = path.with_name(f"{path.name}.{os.environ['PYTEST_XDIST_WORKER']}")
    part.write_text(json.dumps(groups))
    os.replace(part, path)  # every worker writes the same groups


def make_scheduler(config: pytest.Config, log):
    """pytest-xdist's scope scheduling with a test's group, if it has one, as its scope and the test itself
    otherwise; work units are handed out in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # first asked once every worker has collected (and written the file)
                path = session_root(self.config) / GROUPS_FILE
                self.groups = json.loads(path.read_text()) if path.exists() else {}
            group = self.groups.get(nodeid)
            return f"group {group}" if group is not None else nodeid

    config.option.loadscopereorder = False  # keep conftest.py's order, not the largest unit first
    return GroupScheduling(config, log)
