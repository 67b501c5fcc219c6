"""Where the run ran: the device and software versions, the commit, and what parameters loaded."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from repro.core.analysis.provenance import provenance_name
from repro.report.model import Common, Section, TemplateFile

#: Environment entries shown, in order (the manifest records them).
ITEMS = (
    "device",
    "driver",
    "cuda_runtime",
    "python",
    "torch",
    "triton",
    "compute_sanitizer",
    "compute_sanitizer_version",
    "git_sha",
)


@dataclass(frozen=True)
class Loaded:
    """An implementation a parameter named: its provenance as recorded, or only its target."""

    parameter: str
    name: str
    target: str
    details: tuple[tuple[str, str], ...]  # (key, value) recorded beside the target
    recorded: bool


@dataclass(frozen=True)
class Environment:
    table: pd.DataFrame
    loaded: tuple[Loaded, ...]


#: What an entry says when the run recorded nothing for it.
NOT_RECORDED = "not recorded"
#: What an entry says when the run recorded that there is none, by entry (``environment.describe`` writes ``None``
#: for the driver on a machine without a GPU and for the CUDA runtime of a CPU build of torch, and no sanitizer
#: version when it found no compute-sanitizer): the truth, rather than "not recorded".
ABSENT = {
    "driver": "none (no GPU)",
    "cuda_runtime": "none (torch built without CUDA)",
    "compute_sanitizer_version": "none (no compute-sanitizer)",
}


def _value(v: object) -> str:
    return NOT_RECORDED if v is None or v == "" else str(v)


def _absent(env: dict, key: str) -> bool:
    """The run recorded that the machine has none of ``key`` (rather than failing to record it)."""
    if key == "compute_sanitizer_version":
        return env.get("compute_sanitizer") == "unavailable" and not env.get(key)
    return key in ABSENT and key in env and env[key] is None and env.get("cuda_available") is False


def _entry(env: dict, key: str) -> str:
    return ABSENT[key] if _absent(env, key) else _value(env.get(key))


def derive(c: Common) -> Environment:
    env, m = c.run.environment, c.run.manifest
    rows = [{"item": "profile", "value": _value(m.get("profile"))}]
    rows += [{"item": k, "value": _entry(env, k)} for k in ITEMS]
    rows.append({"item": "git_dirty", "value": {True: "yes", False: "no"}.get(env.get("git_dirty"), NOT_RECORDED)})
    rows.append({"item": "platform", "value": _value(env.get("platform"))})
    recorded, params = m.get("implementations") or {}, m.get("parameters") or {}
    loaded = []
    for param in ("implementation", "reference_gather"):
        info = recorded.get(param)
        if info:
            details = tuple(
                (key, _value(info[key]))
                for key in sorted(info)
                if key not in ("target", "package", "version", "loaded")
            ) + tuple(  # what each case process loaded, hashed after it loaded (one entry per process)
                (
                    "case process loaded",
                    f"{e.get('target')} from {e.get('module_file')}, sha256 {e.get('module_sha256')}",
                )
                for e in info.get("loaded") or []
                if isinstance(e, dict)
            )
            loaded.append(Loaded(param, provenance_name(info), str(info.get("target", "")), details, True))
        elif params.get(param):
            loaded.append(Loaded(param, "", str(params[param]), (), False))
    return Environment(pd.DataFrame(rows), tuple(loaded))


MARKDOWN = TemplateFile("repro.report", "environment.md.j2")

COMMENT = TemplateFile("repro.report", "environment-comment.md.j2")

SECTION = Section("environment", derive, MARKDOWN, COMMENT)
