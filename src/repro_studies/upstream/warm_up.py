"""How the JIT fingerprint warms a kernel up at the full table width before it launches the narrower widths: a value
the fingerprint rows record as columns (numbers and classes; the report's ``phrases.md.j2`` words them)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class WarmUpKind(StrEnum):
    """Which warm-up ran (the rows' ``warm_up``)."""

    FULL_WIDTH_LAUNCH = "full-width launch"  # one launch on the full-width contiguous table
    RELEASE_CLASS = "release class"  # the release's JIT-warmup class compiling its warm-up keys (vLLM >= 0.30)


@dataclass(frozen=True)
class WarmUp:
    """A warm-up: by default one launch on the full-width contiguous table; for a release's JIT-warmup class
    (``owner``), ``get_warmup_keys`` then ``compile_many`` for a model config of ``max_model_len`` and
    ``block_size`` (table width ``width``) and the model's ``compress_ratios``."""

    kind: WarmUpKind = WarmUpKind.FULL_WIDTH_LAUNCH
    owner: str = ""
    max_model_len: int | None = None
    block_size: int | None = None
    width: int | None = None
    compress_ratios: tuple[int, ...] = ()

    def columns(self) -> dict:
        """The fingerprint row's columns of this warm-up."""
        return {
            "warm_up": str(self.kind),
            "warm_up_class": self.owner,
            "warm_up_max_model_len": self.max_model_len,
            "warm_up_block_size": self.block_size,
            "warm_up_width": self.width,
            "warm_up_compress_ratios": ", ".join(map(str, self.compress_ratios)),
        }


#: The columns of a row launched without any warm-up.
NO_WARM_UP = dict.fromkeys(WarmUp().columns(), None) | {"warm_up": ""}
