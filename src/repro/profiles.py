"""Profiles: where kernels run and how big the cases are.

``cpu`` runs every kernel in Triton's interpreter (``TRITON_INTERPRET=1``) with sizes that keep a
whole run within minutes on 2 cores; ``gpu`` compiles them for the CUDA device with production-like
sizes; ``auto`` picks ``gpu`` when CUDA is available. Activation must happen before
``repro.core.kernels`` is imported: ``@triton.jit`` chooses interpreter or compiler at definition time.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

PROFILE_NAMES = ("auto", "cpu", "gpu")


class ProfileError(ValueError):
    pass


@dataclass(frozen=True)
class Profile:
    name: str
    device: str
    interpret: bool
    #: longest sequence in the gather sweep (tokens); the narrowed table width follows from it
    gather_seq_len_max: int
    #: per-case time limit for cases run in their own process (seconds)
    case_timeout_s: float
    #: first block id of the sweep's high-id cases (one token per block, 1,152-byte pages): on the CPU past what
    #: 16 bits hold (37.7 MB below it), on a GPU past what a 32-bit byte offset reaches (2.4 GB below it)
    high_block_id: int = 2**15


PROFILES = {
    "cpu": Profile("cpu", "cpu", True, gather_seq_len_max=160, case_timeout_s=120.0, high_block_id=2**15),
    "gpu": Profile("gpu", "cuda", False, gather_seq_len_max=1024, case_timeout_s=120.0, high_block_id=2**21),
}


def cuda_available() -> bool:
    import torch  # lazy: seconds to import; the cpu profile and the report never need it

    return torch.cuda.is_available()


def resolve(name: str) -> str:
    if name not in PROFILE_NAMES:
        raise ProfileError(f"profile: {name!r} is not one of {', '.join(PROFILE_NAMES)}")
    if name == "auto":
        return "gpu" if cuda_available() else "cpu"
    if name == "gpu" and not cuda_available():
        raise ProfileError(
            "profile: 'gpu' needs a CUDA device and torch.cuda.is_available() is False (accepted here: auto, cpu)"
        )
    return name


def activate(name: str) -> Profile:
    """Resolve ``name`` and set up the process for it; call before importing ``repro.core.kernels``."""
    profile = PROFILES[resolve(name)]
    if profile.interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    gather = sys.modules.get("repro.core.kernels.gather")
    if gather is not None:
        from repro.core.kernels.launch import is_interpreted  # lazy: triton; the report reads profiles without it

        if is_interpreted(gather._dequantize_and_gather_k_kernel) != profile.interpret:
            raise ProfileError(
                f"profile: {profile.name!r} was activated after repro.core.kernels was imported in "
                "the other mode; restart the kernel and activate the profile first"
            )
    return profile
