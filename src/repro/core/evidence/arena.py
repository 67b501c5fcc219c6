"""A case's tensors in files that the case process and its parent both map (``MAP_SHARED``).

The parent copies each tensor's whole storage into a file of its own (a view keeps its storage offset and strides,
so a narrowed block table keeps its backing columns and the K cache its page padding) and keeps its own mapping of
every file. The case process maps the same files and hands the implementation views of them (on a GPU, device
copies it copies back after the call). After the call the parent reads the caller's buffer and every input through
its own mapping, which the implementation never sees: what the implementation's process believes or reports about
them decides nothing.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

#: Where arenas go when it has room: memory, not disk.
SHARED_MEMORY = Path("/dev/shm")


@dataclass(frozen=True)
class Placement:
    """One tensor in the arena: its storage's file and bytes, and the view of it (in elements of ``dtype``)."""

    file: str
    dtype: str
    nbytes: int
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]

    @classmethod
    def of(cls, data: Mapping) -> Placement:
        return cls(
            str(data["file"]),
            str(data["dtype"]),
            int(data["nbytes"]),
            int(data["offset"]),
            tuple(int(x) for x in data["shape"]),
            tuple(int(x) for x in data["stride"]),
        )


def _dtype(name: str) -> torch.dtype:
    found = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(found, torch.dtype):
        raise ValueError(f"not a torch dtype: {name!r}")
    return found


def storage_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """The whole storage under ``tensor`` as bytes (a view's gaps included)."""
    return torch.empty(0, dtype=torch.uint8, device=tensor.device).set_(tensor.untyped_storage())


def map_file(path: Path, nbytes: int) -> torch.Tensor:
    """``nbytes`` of ``path`` as a shared uint8 tensor (created when missing)."""
    return torch.from_file(str(path), shared=True, size=max(1, nbytes), dtype=torch.uint8)


def view_of(data: torch.Tensor, placement: Placement) -> torch.Tensor:
    """The tensor ``placement`` names, over the bytes ``data`` (a uint8 tensor holding its storage)."""
    return torch.empty(0, dtype=_dtype(placement.dtype), device=data.device).set_(
        data.untyped_storage(), placement.offset, placement.shape, placement.stride
    )


#: Room shared memory must have for arenas to go there (a GPU profile's case with high block ids maps 2.4 GB;
#: a file that outgrows its folder's room ends the process that writes it).
SHARED_MEMORY_ROOM = 4 << 30


def arena_folder() -> Path:
    """A private folder for one case process's arenas: in shared memory when it has the room, else the temporary
    folder."""
    base = None
    try:
        stat = os.statvfs(SHARED_MEMORY)
        if stat.f_bavail * stat.f_frsize >= SHARED_MEMORY_ROOM:
            base = str(SHARED_MEMORY)
    except OSError:
        pass
    folder = Path(tempfile.mkdtemp(prefix="repro-arena-", dir=base))
    folder.chmod(0o700)
    return folder


class Arena:
    """The parent's side: the files, their placements and the parent's own mapping of each."""

    def __init__(self, folder: Path, placements: dict[str, Placement], data: dict[str, torch.Tensor]):
        self.folder, self.placements, self.data = folder, placements, data

    @classmethod
    def build(cls, folder: Path, tensors: Mapping[str, torch.Tensor]) -> Arena:
        """Copy each tensor's storage into ``folder`` (one file each) and keep a shared mapping of it."""
        placements, data = {}, {}
        for name, tensor in tensors.items():
            source = storage_bytes(tensor)
            placement = Placement(
                f"{name}.bin",
                str(tensor.dtype),
                int(source.numel()),
                int(tensor.storage_offset()),
                tuple(tensor.shape),
                tuple(tensor.stride()),
            )
            mapped = map_file(folder / placement.file, placement.nbytes)
            mapped[: placement.nbytes].copy_(source.cpu())
            placements[name], data[name] = placement, mapped
        return cls(folder, placements, data)

    def layout(self) -> dict[str, dict]:
        """What the case process needs to map the same views (JSON)."""
        return {name: asdict(p) for name, p in self.placements.items()}

    def view(self, name: str) -> torch.Tensor:
        """The tensor ``name`` as it is now, through the parent's own mapping."""
        return view_of(self.data[name], self.placements[name])

    def storage(self, name: str) -> torch.Tensor:
        """The bytes of ``name``'s storage as they are now (the parent's mapping)."""
        return self.data[name][: self.placements[name].nbytes]

    def remove(self) -> None:
        for p in self.placements.values():
            (self.folder / p.file).unlink(missing_ok=True)
        self.data.clear()


def open_views(folder: Path, layout: Mapping[str, Mapping]) -> dict[str, tuple[torch.Tensor, Placement]]:
    """The case process's side: each tensor's bytes (mapped) and placement."""
    out = {}
    for name, raw in layout.items():
        placement = Placement.of(raw)
        out[name] = (map_file(folder / placement.file, placement.nbytes)[: placement.nbytes], placement)
    return out


def remove_folder(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
