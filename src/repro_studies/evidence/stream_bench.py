"""The streaming ceiling's arms: the gather's traffic without its block table
(:mod:`repro_studies.kernels.stream`), one arm per kernel kind, built for :mod:`repro_studies.evidence.ceiling`
to time with :mod:`repro_studies.evidence.timing`."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch

from repro.core.geometry.layout import DSV4, GATHER_READ_BYTES_PER_TOKEN, GATHER_WRITE_BYTES_PER_TOKEN
from repro_studies.registry import StreamKind

#: Streaming kernels: what each moves per token (bytes read, bytes written).
STREAM_KINDS = {
    StreamKind.STREAM: (GATHER_READ_BYTES_PER_TOKEN, GATHER_WRITE_BYTES_PER_TOKEN),
    StreamKind.MOVE: (GATHER_READ_BYTES_PER_TOKEN, GATHER_WRITE_BYTES_PER_TOKEN),
    StreamKind.READ: (GATHER_READ_BYTES_PER_TOKEN, 0),
    StreamKind.WRITE: (0, GATHER_WRITE_BYTES_PER_TOKEN),
}


@dataclass
class StreamBench:
    """One streaming arm over ``copies`` independent buffers of ``tokens`` tokens.

    ``check()`` runs the kernel once on the first copy and compares it bitwise with the PyTorch
    reference: (mismatched, stray = 0, total, unit); ``eager`` is one launch, ``graph_calls`` one
    launch per copy.
    """

    kind: StreamKind
    layout: str
    tokens: int
    block_t: int
    num_warps: int
    bytes_read: int
    bytes_written: int
    check: object
    eager: object
    graph_calls: list


def stream_bench(
    kind: StreamKind,
    tokens: int,
    copies: int,
    layout: str = "records",
    block_t: int | None = None,
    num_warps: int | None = None,
    device: str = "cuda",
    seed: int = 0,
    **dequant: object,
) -> StreamBench:
    """Build the inputs, outputs and launches of one streaming arm (``kind`` in :data:`STREAM_KINDS`);
    ``dequant``: :func:`repro_studies.kernels.stream.stream_dequant`'s tile settings (``tile``, ``tiles_per_program``,
    ``num_stages``, ``prefetch``) for the ``"stream"`` kind."""
    from repro_studies.kernels import stream as S  # lazy: a kernel module, defined under the profile chosen first

    if kind not in STREAM_KINDS:
        raise ValueError(f"kind must be one of {sorted(k.value for k in STREAM_KINDS)}, got {kind!r}")
    if dequant and kind != StreamKind.STREAM:
        raise ValueError(f"tile settings {sorted(dequant)} apply to the 'stream' kind only, not {kind!r}")
    block_t = block_t or S.DEFAULT_BLOCK_T
    num_warps = num_warps or S.DEFAULT_NUM_WARPS
    tiles = {"block_t": block_t, "num_warps": num_warps, "plan": "grid"}
    per_read, per_write = STREAM_KINDS[kind]
    if kind == StreamKind.WRITE:
        outs = [torch.empty(tokens, DSV4.head_dim, dtype=torch.bfloat16, device=device) for _ in range(copies)]
        calls = [partial(S.stream_write, out, **tiles) for out in outs]

        def check():
            out = torch.full_like(outs[0].view(torch.int16), -1).view(torch.bfloat16)
            S.stream_write(out, **tiles)
            bad = int((out.view(torch.int16) != S.write_reference(tokens, device).view(torch.int16)).any(1).sum())
            return bad, 0, tokens, "rows"
    elif kind == StreamKind.MOVE:
        inputs = [S.make_stream_input(tokens, layout, seed=seed + k, device=device) for k in range(copies)]
        outs = [torch.empty(tokens, DSV4.head_dim, dtype=torch.bfloat16, device=device) for _ in range(copies)]
        moves = {"block_t": block_t, "num_warps": num_warps}
        calls = [partial(S.stream_move, inp, out, **moves) for inp, out in zip(inputs, outs)]

        def check():
            out = inputs[0].fresh_out()
            launch = S.stream_move(inputs[0], out, **moves)
            ref = S.move_reference(inputs[0], launch)
            bad = int((out.view(torch.int16) != ref.view(torch.int16)).any(1).sum())
            return bad, 0, tokens, "tokens"
    else:
        inputs = [S.make_stream_input(tokens, layout, seed=seed + k, device=device) for k in range(copies)]
        if kind == StreamKind.STREAM:
            outs = [torch.empty(tokens, DSV4.head_dim, dtype=torch.bfloat16, device=device) for _ in range(copies)]
            calls = [partial(S.stream_dequant, inp, out, **tiles, **dequant) for inp, out in zip(inputs, outs)]

            def check():
                out = inputs[0].fresh_out()
                S.stream_dequant(inputs[0], out, **tiles, **dequant)
                ref = S.stream_reference(inputs[0])
                bad = int((out.view(torch.int16) != ref.view(torch.int16)).any(1).sum())
                return bad, 0, tokens, "tokens"
        else:
            launch = S.plan_stream(tokens, block_t, num_warps, "grid")
            sums = [S.read_sums_buffer(inp, launch) for inp in inputs]
            calls = [partial(S.stream_read, inp, s, **tiles) for inp, s in zip(inputs, sums)]

            def check():
                _, got = S.stream_read(inputs[0], **tiles)
                bad = int((got != S.read_reference(inputs[0], launch)).sum())
                return bad, 0, launch.grid[0], "program sums"

    return StreamBench(
        kind=kind,
        layout=layout if kind != StreamKind.WRITE else "",
        tokens=tokens,
        block_t=block_t,
        num_warps=num_warps,
        bytes_read=tokens * per_read,
        bytes_written=tokens * per_write,
        check=check,
        eager=calls[0],
        graph_calls=calls,
    )
