"""What a run ran on: versions, device, driver, git revision and sanitizer availability."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

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


def _torch_build() -> ModuleType:
    """torch's own ``torch/version.py`` (its version and the CUDA it was built with), loaded alone: importing torch
    takes about a second of CPU, and a run's parent needs torch only where the build has CUDA to ask about."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("torch is not installed: pip install torch")
    path = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    loaded = importlib.util.spec_from_file_location("repro_torch_version", path)
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module


def _triton_version() -> str:
    try:
        return importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:  # a build under another distribution name
        import triton  # lazy: seconds to import, and only where the distribution is not named triton

        return triton.__version__


def describe(root: Path) -> dict:
    build = _torch_build()
    info = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": build.__version__,
        "triton": _triton_version(),
        "cuda_available": False,  # a build without CUDA never has it
        "device": "cpu (Triton interpreter)",
        "driver": None,
        "cuda_runtime": build.cuda,
    }
    if build.cuda is not None:
        import torch  # lazy: seconds to import; only a build with CUDA is asked for a device

        info["cuda_available"] = torch.cuda.is_available()
        if info["cuda_available"]:
            info["device"] = torch.cuda.get_device_name(0)
            info["driver"] = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    sanitizer = find_compute_sanitizer()
    info["compute_sanitizer"] = sanitizer or "unavailable"
    if sanitizer:
        version = _run([sanitizer, "--version"])
        info["compute_sanitizer_version"] = version.splitlines()[-1] if version else None
    info.update(git_revision(root))
    return info
