"""vLLM's own DeepSeek-V4 gather, loaded from a release's wheel, for notebook 03: timed beside the
repository's kernels and put through the JIT fingerprint.

A :class:`ReleaseKernel` is one release's V4 gather (the ``deepseek_v4`` family's kernel reading the
584-byte record) in one form: ``released`` (as shipped), ``patched`` (PR #55109: the row pitch is
``block_table.stride(0)``, a runtime argument) or ``patched-constexpr`` (the stride, left a
``tl.constexpr``). The callable it hands out calls the release's own Python wrapper directly, outside the
release's import scope, so a timed eager launch costs what vLLM's launch path costs and no import
machinery; its first call checks that the wrapper launched the kernel under test and imported nothing.

Who wrote the code is read from what was loaded (:func:`origin_of`: the wheel pip downloaded), never typed.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import re
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro_studies.kernel_id import KernelFamily
from repro_studies.registry import TRITON_FORMS, Form, code_label
from repro_studies.upstream.arms import Arm, WrongKernel, load_arm
from repro_studies.upstream.discovery import KernelInfo, discover
from repro_studies.upstream.loader import LoadedRelease
from repro_studies.upstream.patcher import Rewrite, rewrite_row_pitch
from repro_studies.upstream.warm_up import WarmUp, WarmUpKind
from repro_studies.upstream.wheelcache import CacheEntry, CacheMiss, ensure_release

#: The stub a release's JIT warm-up asks for the model's compress ratios.
COMPRESS_STUB = "vllm.transformers_utils.deepseek_v4_utils"
_WHEEL = re.compile(r"^vllm-([^-]+)-")


class ReleaseUnavailable(RuntimeError):
    """A release's kernel cannot be had here; the message says why (cache miss, no V4 gather, patch failed)."""


def release_of(entry: CacheEntry) -> str:
    """The version of the wheel the cache entry was extracted from (the file pip downloaded)."""
    wheel = str(entry.provenance.get("wheel") or "")
    found = _WHEEL.match(wheel)
    if not found:
        raise ReleaseUnavailable(f"vLLM {entry.version}: the cache records no wheel name ({wheel!r})")
    if found.group(1) != entry.version:
        raise ReleaseUnavailable(f"vLLM {entry.version}: the cached files come from {wheel}")
    return found.group(1)


def origin_of(entry: CacheEntry) -> str:
    """``vLLM <version>`` of the wheel the cache entry was extracted from (:func:`release_of`)."""
    return code_label(release_of(entry))


def v4_kernel(entry: CacheEntry) -> KernelInfo:
    """The DeepSeek-V4 model's own gather of the 584-byte record (not the V4.1 module's, not ROCm's one-pass)."""
    sources = {m: entry.read(m) for m in entry.members() if "deepseek_v4" in m}
    found = [
        k
        for k in discover(sources).kernels
        if k.id.family == KernelFamily.V4 and k.record == "v4" and "one_pass" not in k.name and k.wrapper
    ]
    if len(found) != 1:
        names = ", ".join(k.label for k in found) or "none"
        raise ReleaseUnavailable(f"vLLM {entry.version}: expected one DeepSeek-V4 gather of the V4 record: {names}")
    return found[0]


@contextlib.contextmanager
def no_vllm_imports() -> Iterator[None]:
    """Any ``vllm`` import inside the block is an error naming it (a wrapper must not import at call time)."""

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
            if fullname == "vllm" or fullname.startswith("vllm."):
                raise ImportError(f"the release's wrapper imported {fullname} at call time, outside its scope")
            return None

    finder = Refuse()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


@dataclass
class ReleaseKernel:
    """One release's V4 gather in one form, imported and ready to call with vLLM's gather signature."""

    release: str  # the loaded wheel's version (:func:`release_of`)
    origin: str
    form: Form
    info: KernelInfo
    loaded: LoadedRelease
    module: types.ModuleType
    wrapper: Callable[..., Any]
    kernel: Any  # the @triton.jit function the wrapper launches
    rewrite: Rewrite | None

    @property
    def label(self) -> str:
        return self.info.label

    def provenance(self) -> dict:
        info = self.loaded.provenance()
        return {
            **info,
            "origin": self.origin,
            "form": self.form,
            "kernel": self.info.label,
            "module": self.info.module,
            "wrapper": self.info.wrapper,
            "kernel_sha256": self.info.source_sha256,
            "edits": list(self.rewrite.edits) if self.rewrite else [],
        }

    def launch_checked(self, *args: Any) -> None:
        """One call of the wrapper that must launch :attr:`kernel` and import nothing."""
        launched: list[bool] = []
        had = "run" in vars(self.kernel)
        previous = self.kernel.run

        def recording(*a: Any, **kw: Any) -> Any:
            launched.append(True)
            return previous(*a, **kw)

        self.kernel.run = recording
        try:
            with no_vllm_imports():
                self.wrapper(*args)
        finally:
            if had:
                self.kernel.run = previous
            else:
                del self.kernel.run
        if not launched:
            raise WrongKernel(f"{self.origin}'s {self.info.wrapper} did not launch {self.info.qualname}")

    def gather(self, copy_table: bool = False) -> Callable[..., None]:
        """``fn(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)``: the release's wrapper;
        ``copy_table`` first materialises the table with ``.contiguous()`` (the alternative PR #55109 rejects).
        The first call is :meth:`launch_checked`."""
        wrapper, checked = self.wrapper, [False]

        def fn(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset) -> None:
            table = block_table.contiguous() if copy_table else block_table
            if not checked[0]:
                self.launch_checked(out, k_cache, seq_lens, gather_lens, table, block_size, offset)
                checked[0] = True
                return
            wrapper(out, k_cache, seq_lens, gather_lens, table, block_size, offset)

        fn.__qualname__ = f"{self.origin} {self.form}{' + .contiguous()' if copy_table else ''}"
        return fn

    def warm_up(
        self, backing_width: int, block_size: int, compress_ratios: tuple[int, ...]
    ) -> tuple[Callable[[], None], WarmUp] | None:
        """The release's own JIT warm-up for a model whose block table is ``backing_width`` blocks wide, or
        None when the release has none for this kernel (no JIT-warmup class instance in the module).

        vLLM >= 0.30 wraps the gather in a JIT-warmup class; at start-up vLLM calls its ``get_warmup_keys``
        with the engine's config and compiles each key. Here the config holds ``max_model_len = backing_width
        x block_size`` and ``block_size``, so the warm-up's table width is ``backing_width``; the model's
        compress ratios are answered by the stub of ``get_compress_ratios``.
        """
        if not self.info.class_name:
            return None
        owner_class = getattr(self.module, self.info.class_name)
        owners = [v for v in vars(self.module).values() if isinstance(v, owner_class)]
        if not owners or not all(hasattr(owners[0], a) for a in ("get_warmup_keys", "compile_many")):
            return None
        owner = owners[0]
        config = types.SimpleNamespace(
            model_config=types.SimpleNamespace(max_model_len=backing_width * block_size, hf_config=None),
            cache_config=types.SimpleNamespace(block_size=block_size),
        )

        def run() -> None:
            with self.loaded.active():
                self.loaded.stub(COMPRESS_STUB).COMPRESS_RATIOS = tuple(compress_ratios)
                owner.compile_many(owner.get_warmup_keys(config))

        how = WarmUp(
            WarmUpKind.RELEASE_CLASS,
            self.info.class_name,
            backing_width * block_size,
            block_size,
            backing_width,
            tuple(compress_ratios),
        )
        return run, how


def load_release_kernel(
    version: str, form: str, cache_root: str | Path | None = None, download: bool = True
) -> ReleaseKernel:
    """Release ``version``'s V4 gather in ``form``, imported from the cache (filled from the registry when
    ``download``); :class:`ReleaseUnavailable` says why not."""
    if form not in TRITON_FORMS:
        raise ValueError(f"form: {form!r} is not one of {', '.join(TRITON_FORMS)}")
    cache_root = Path(cache_root) if cache_root else None
    entry = ensure_release(version, cache_root, download=download)
    if isinstance(entry, CacheMiss):
        raise ReleaseUnavailable(f"vLLM {version}: {entry.status}: {entry.reason}")
    release, form = release_of(entry), Form(form)
    info = v4_kernel(entry)
    rewrite = None
    if form != Form.RELEASED:
        try:
            rewrite = rewrite_row_pitch(entry.read(info.module), info.module, runtime=form == Form.PATCHED)
        except Exception as exc:
            raise ReleaseUnavailable(f"vLLM {version} {form}: patch failed: {exc}") from None
    arm = Arm(
        version,
        info.label,
        form,
        info.module,
        info.wrapper,
        info.record,
        info.interleaved,
        kernel_name=info.name,
        class_name=info.class_name,
        cache_root=str(cache_root or ""),
    )
    try:
        loaded, wrapper, watched = load_arm(arm)
        module = loaded.import_module(info.module)
    except Exception as exc:
        raise ReleaseUnavailable(f"vLLM {version} {form}: could not load: {type(exc).__name__}: {exc}") from None
    return ReleaseKernel(release, code_label(release), form, info, loaded, module, wrapper, watched[0], rewrite)
