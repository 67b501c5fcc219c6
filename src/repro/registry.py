"""Resolve a gather implementation named ``"package.module:function"`` and check its signature.

This is how a vLLM developer points the notebooks at another implementation, for example an
installed vLLM's ``vllm.models.deepseek_v4.common.ops.cache_utils:dequantize_and_gather_k_cache_triton``.
"""

from __future__ import annotations

import importlib
import inspect

GATHER_SIGNATURE = "fn(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)"
GATHER_ARGS = ("out", "k_cache", "seq_lens", "gather_lens", "block_table", "block_size", "offset")

#: The library's own variants, by the label used in result tables.
BUILTIN = {
    "buggy": "repro.kernels.gather:gather_buggy",
    "fixed": "repro.kernels.gather:gather_fixed",
    "contiguous-copy": "repro.kernels.gather:gather_contiguous_copy",
    "fast": "repro.kernels.fast:gather_fast",
}


class ImplementationError(ValueError):
    """The named implementation cannot be used; the message says why and what is accepted."""


def load_implementation(path: str, param: str = "implementation"):
    """Import ``"package.module:function"`` and check it accepts vLLM's 7 positional arguments."""
    accepted = f"accepted: 'package.module:function' with signature {GATHER_SIGNATURE}"
    if not isinstance(path, str) or path.count(":") != 1 or not all(path.split(":")):
        raise ImplementationError(f"{param}: {path!r} is not of the form 'package.module:function'; {accepted}")
    module_name, func_name = path.split(":")
    try:
        module = importlib.import_module(module_name)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # any import failure is the user's path problem, SystemExit included
        raise ImplementationError(f"{param}: cannot import module {module_name!r} "
                                  f"({type(exc).__name__}: {exc}); {accepted}") from None
    fn = getattr(module, func_name, None)
    if fn is None or not callable(fn):
        raise ImplementationError(f"{param}: module {module_name!r} has no function {func_name!r}; {accepted}")
    try:
        sig = inspect.signature(fn)
        sig.bind(*GATHER_ARGS)
    except (TypeError, ValueError) as exc:
        raise ImplementationError(f"{param}: {path} has signature {_describe(fn)}, which does not take "
                                  f"the 7 positional arguments of {GATHER_SIGNATURE} ({exc})") from None
    return fn


def _describe(fn) -> str:
    try:
        return f"{fn.__name__}{inspect.signature(fn)}"
    except (TypeError, ValueError):
        return repr(fn)


def _probe_main(argv: list[str]) -> int:
    """``python -m repro.registry PATH PARAM TOKEN``: check one implementation in a throw-away process.

    Prints ``TOKEN ok`` as the last line on success, ``TOKEN <the one-line error>`` otherwise; a module
    that ends the process on import prints neither, which the caller reports.
    """
    path, param, token = argv
    try:
        load_implementation(path, param)
    except ImplementationError as exc:
        print(f"\n{token} {exc}", flush=True)
        return 2
    print(f"\n{token} ok", flush=True)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(_probe_main(sys.argv[1:]))
