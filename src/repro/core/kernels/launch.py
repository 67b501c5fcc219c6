"""Launch shapes for the two ways a kernel runs here: compiled on a GPU, or in Triton's CPU interpreter.

The interpreter pays a fixed 6-10 ms per program instance, and it cannot use a value loaded from
memory as a loop bound (NumPy >= 2.4 refuses to turn the 1-element array into an int). So in the
interpreter the same kernels run with few programs, many tokens per program and a host-side loop
bound; on a GPU they run with vLLM's launch shape. Both compute the same outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import triton
from triton.runtime.interpreter import InterpretedFunction


def is_interpreted(kernel: object) -> bool:
    """True when ``kernel`` was defined under ``TRITON_INTERPRET=1`` (the decorator decides)."""
    return isinstance(kernel, InterpretedFunction)


#: Most tokens one interpreted program handles per step: fewer, larger NumPy operations per program.
INTERPRETER_MAX_TOKENS = 256


@dataclass(frozen=True)
class GatherLaunch:
    num_workers: int  # programs per request (grid axis 1)
    tokens_per_iter: int  # tokens one program handles per loop iteration
    loop_to_gather_len: bool  # loop bound loaded from memory (vLLM) or a host-side upper bound
    max_iters: int = 0  # the host-side bound, in iterations (0 when the loop runs to the loaded gather_len)


#: vLLM's `(num_reqs, 128)` grid, one token per loop iteration, looping up to the loaded gather_len.
VLLM_GATHER_LAUNCH = GatherLaunch(num_workers=128, tokens_per_iter=1, loop_to_gather_len=True)


def gather_launch(interpreted: bool, max_gather: int) -> GatherLaunch:
    """vLLM's launch shape when compiled; in the interpreter one program per request, up to
    :data:`INTERPRETER_MAX_TOKENS` tokens per iteration, looping to ``max_gather`` (a host-side bound)."""
    if not interpreted:
        return VLLM_GATHER_LAUNCH
    tokens = min(INTERPRETER_MAX_TOKENS, triton.next_power_of_2(max(1, max_gather)))
    return GatherLaunch(1, tokens, loop_to_gather_len=False, max_iters=triton.cdiv(max_gather, tokens))


def interpreter_writer_tokens(num_tokens: int) -> int:
    """Tokens per writer program in the interpreter (vLLM's writer uses one program per token)."""
    return min(64, triton.next_power_of_2(max(1, num_tokens)))
