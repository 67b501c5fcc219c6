"""What a run ran on: versions, device, driver, git revision and sanitizer availability."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

#: Where CUDA images usually keep the tool when it is not on PATH.
SANITIZER_FALLBACKS = ("/usr/local/cuda/bin/compute-sanitizer",)


def find_compute_sanitizer() -> str | None:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for candidate in SANITIZER_FALLBACKS:
        if Path(candidate).is_file():
            return candidate
    return None


def _run(cmd: list[str], cwd: Path | None = None) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


#: What ``REPRO_GIT_DIRTY`` may say about the sending host's checkout.
GIT_DIRTY_VALUES = {"true": True, "false": False}


def host_identity_error() -> str | None:
    """Why the sending host's description of the checkout cannot be recorded, before a run starts: a dirty flag
    other than ``true``/``false`` would be written as "not recorded" and pass unnoticed."""
    dirty = os.environ.get("REPRO_GIT_DIRTY")
    if dirty is not None and dirty.strip().lower() not in GIT_DIRTY_VALUES:
        return f"REPRO_GIT_DIRTY: {dirty!r} is not a dirty flag; accepted: true or false"
    if dirty is not None and not os.environ.get("REPRO_GIT_SHA"):
        return "REPRO_GIT_DIRTY: set without REPRO_GIT_SHA; accepted: both (the sending host's commit) or neither"
    return None


def git_revision(root: Path) -> dict:
    """The checkout's commit and whether tracked files differ from it.

    A copy of a checkout on another host (a GPU machine without the repository's history, or with
    stale ``.git`` metadata) is described by the host that sent it: ``REPRO_GIT_SHA`` and
    ``REPRO_GIT_DIRTY`` (``true``/``false``) win over what ``git`` reports in the copy.
    """
    if os.environ.get("REPRO_GIT_SHA"):
        dirty = os.environ.get("REPRO_GIT_DIRTY", "").strip().lower()
        return {
            "git_sha": os.environ["REPRO_GIT_SHA"],
            "git_dirty": GIT_DIRTY_VALUES.get(dirty, "not recorded"),
        }
    sha = _run(["git", "rev-parse", "HEAD"], root)
    if sha is None:
        return {"git_sha": "unknown", "git_dirty": "not recorded"}
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"], root)
    return {"git_sha": sha, "git_dirty": bool(dirty) if dirty is not None else "not recorded"}


def describe(root: Path) -> dict:
    import torch  # lazy: seconds to import; sanitizer lookup and git revision are used without it
    import triton  # lazy: as torch

    info = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda_available": torch.cuda.is_available(),
        "device": "cpu (Triton interpreter)",
        "driver": None,
        "cuda_runtime": torch.version.cuda,
    }
    if torch.cuda.is_available():
        info["device"] = torch.cuda.get_device_name(0)
        info["driver"] = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    sanitizer = find_compute_sanitizer()
    info["compute_sanitizer"] = sanitizer or "unavailable"
    if sanitizer:
        version = _run([sanitizer, "--version"])
        info["compute_sanitizer_version"] = version.splitlines()[-1] if version else None
    info.update(git_revision(root))
    return info
