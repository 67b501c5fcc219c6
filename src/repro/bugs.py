"""The vLLM pull requests and issues this repository reproduces, named once: a reference is written from a
:class:`Bug`, never typed into prose."""

from __future__ import annotations

from enum import StrEnum


class Bug(StrEnum):
    """A vLLM pull request or issue this repository reproduces, by its number; its value is the reference GitHub
    links from any repository (``vllm-project/vllm#43988``)."""

    RESHAPE = 43988, "reshape overrun"
    GATHER = 55109, "strided block-table gather"
    SPLIT = 54877, "split uncompressed groups' overrun"  # the open follow-up of RESHAPE

    def __new__(cls, pr: int, title: str) -> Bug:
        member = str.__new__(cls, f"vllm-project/vllm#{pr}")
        member._value_ = f"vllm-project/vllm#{pr}"
        member.pr = pr
        member.title = title
        return member

    pr: int
    title: str
