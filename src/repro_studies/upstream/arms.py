"""One matrix arm: a release's gather kernel, released or patched, made callable with vLLM's signature.

An :class:`Arm` is plain data, so a child process can rebuild it (poison cases run isolated). The
callable calls the release's own Python wrapper inside the release's import scope and checks that the
wrapper launched the kernel the arm is about (vLLM's wrappers pick a kernel from ``k_cache.shape[-1]``
and, for the one-pass kernel, from the platform; the stub platform's ``ROCM`` switch selects it).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from repro_studies.kernel_id import KernelId, family_of
from repro_studies.registry import Form
from repro_studies.upstream.interp_compat import loaded_scalar_loop_bounds
from repro_studies.upstream.loader import LoadedRelease
from repro_studies.upstream.patcher import rewrite_row_pitch
from repro_studies.upstream.wheelcache import load_entry


class WrongKernel(RuntimeError):
    """The release's wrapper did not launch the kernel the arm tests."""


@dataclass(frozen=True)
class Arm:
    release: str
    kernel: str  # the matrix label of :attr:`id`, e.g. "v41:_dequantize_and_gather_k_mxfp8_kernel", "cutedsl:v4:v4"
    variant: str  # released | patched | patched-constexpr
    module: str  # wheel member holding the wrapper
    wrapper: str
    record: str
    interleaved: bool
    kernel_name: str = ""  # the @triton.jit function that must launch ("" for CuTe-DSL)
    class_name: str = ""
    rocm: bool = False
    cutedsl: bool = False
    cache_root: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def id(self) -> KernelId:
        """The kernel the arm runs: the CuTe-DSL gather its dispatcher reaches, or the Triton kernel it launches."""
        if self.cutedsl:
            return KernelId.cutedsl(family_of(self.module), self.record)
        qualname = f"{self.class_name}.{self.kernel_name}" if self.class_name else self.kernel_name
        return KernelId.triton(self.module, qualname, self.record)

    @property
    def how(self) -> str:
        switches = []
        if self.rocm:
            switches.append("platform stub is_rocm()=True")
        switches.append(f"has_cutedsl()={self.cutedsl}")
        return f"release's wrapper {self.wrapper} ({', '.join(switches)})"


def load_arm(arm: Arm) -> tuple[LoadedRelease, object, list]:
    """(release scope, the wrapper, the kernel objects to watch); raises on any load failure."""
    root = Path(arm.cache_root) if arm.cache_root else None
    entry = load_entry(arm.release, root)
    if entry is None:
        raise FileNotFoundError(f"vLLM {arm.release} is not in the cache")
    overrides = {}
    if arm.variant in (Form.PATCHED, Form.PATCHED_CONSTEXPR):
        overrides[arm.module] = rewrite_row_pitch(
            entry.read(arm.module), arm.module, runtime=arm.variant == Form.PATCHED
        ).rewritten
    elif arm.variant != Form.RELEASED:
        raise ValueError(
            f"variant: {arm.variant!r} is not one of {Form.RELEASED}, {Form.PATCHED}, {Form.PATCHED_CONSTEXPR}"
        )
    release = LoadedRelease(entry, overrides, tag=f"{arm.release}+{arm.variant}")
    module = release.import_module(arm.module)
    release.stub("vllm.platforms").ROCM = arm.rocm
    release.stub("vllm.utils.import_utils").CUTEDSL = arm.cutedsl
    wrapper = getattr(module, arm.wrapper)
    watched = []
    if arm.kernel_name:
        owner = getattr(module, arm.class_name) if arm.class_name else module
        watched.append(getattr(owner, arm.kernel_name))
    return release, wrapper, watched


def make_callable(arm: Arm, interpreted: bool) -> Callable[..., None]:
    """``fn(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)`` for the arm.

    Each call runs inside the release's import scope. Entering that scope swaps every ``vllm.*`` entry
    of ``sys.modules`` (hundreds of microseconds with a large stack such as CuTe-DSL loaded), so a caller
    that times the arm enters ``fn.scope()`` once around all its calls: inside it a call is the release's
    wrapper and nothing else of the harness (a Triton arm also records which kernel launched).
    """
    release, wrapper, watched = load_arm(arm)
    launched: list[str] = []
    for kernel in watched:
        run = kernel.run

        def recording_run(*args, _run=run, _name=arm.kernel_name, **kwargs):
            launched.append(_name)
            return _run(*args, **kwargs)

        kernel.run = recording_run
    depth = [0]

    @contextlib.contextmanager
    def scope() -> Iterator[None]:
        """The release's import scope (and the interpreter's compatibility patch), entered once."""
        with contextlib.ExitStack() as stack:
            if interpreted:
                stack.enter_context(loaded_scalar_loop_bounds())
            stack.enter_context(release.active())
            depth[0] += 1
            try:
                yield
            finally:
                depth[0] -= 1

    def fn(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset) -> None:
        if depth[0]:
            if arm.kernel_name:
                launched.clear()
            wrapper(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)
        else:
            launched.clear()
            with scope():
                wrapper(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)
        if arm.kernel_name and not launched:
            raise WrongKernel(f"{arm.wrapper} did not launch {arm.kernel_name}")

    fn.release = release
    fn.scope = scope
    return fn


def interpreted_now() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"
