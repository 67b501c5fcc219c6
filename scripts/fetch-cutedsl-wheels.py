"""Wheels of one or more CuTe-DSL stacks for a GPU host without a registry (Python 3.12, manylinux x86_64).

    python scripts/fetch-cutedsl-wheels.py DEST CUTLASS/QUACK [CUTLASS/QUACK ...]

Each pair is ``nvidia-cutlass-dsl[cu13]==CUTLASS`` with ``quack-kernels==QUACK`` and everything their wheels
require (read from each downloaded wheel's own METADATA), less what the GPU host already has (torch, numpy,
cuda-bindings and the like). Written to DEST as

    DEST/small/*.whl               every wheel under PART_MIB MiB (default 29)
    DEST/parts/<wheel>.part-NN     wheels of PART_MIB MiB or more, split so each part fits one carried transfer
    DEST/SHA256SUMS                the hash of every whole wheel (checked after the parts are joined)
    DEST/pairs/CUTLASS-QUACK.txt   the wheels one pair installs, one file name a line

``scripts/cutedsl-pins.sh`` joins, checks and installs one pair on the host (``scripts/cutedsl-env.sh``: the newest);
``python -m repro_studies.upstream.cutedsl_stack RELEASE ...`` says which pair each release pins.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

#: What the GPU host brings (its torch stack, KINDS.md's list): never carried.
HOST = {"torch", "numpy", "typing-extensions", "cuda-python", "cuda-bindings", "backports-strenum"}
#: nvidia-cutlass-dsl asks for its CUDA 12 libraries beside the ``cu13`` extra's; with the CUDA 13 ones installed it
#: loads those (the 4.8.0 runs under data/ ran without the CUDA 12 ones), so they are not carried.
NOT_CARRIED = {"nvidia-cutlass-dsl-libs-cu12"}
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64"]
PLATFORMS += ["manylinux2014_x86_64"]
#: The host's interpreter, for evaluating requirement markers.
TARGET = {**default_environment(), "python_version": "3.12", "python_full_version": "3.12.0"}
TARGET |= {"platform_machine": "x86_64", "sys_platform": "linux", "platform_system": "Linux"}


def download(spec: str, into: Path) -> Path:
    """One wheel, no dependencies: the newest saved in ``into`` that satisfies ``spec`` (what pip picks)."""
    args = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    args += ["--python-version", "3.12", *(f"--platform={p}" for p in PLATFORMS), "-d", str(into), spec]
    subprocess.run(args, check=True)
    req = Requirement(spec)
    found = [
        (parse_wheel_filename(w.name)[1], w)
        for w in into.glob("*.whl")
        if canonicalize_name(parse_wheel_filename(w.name)[0]) == canonicalize_name(req.name)
        and req.specifier.contains(parse_wheel_filename(w.name)[1], prereleases=True)
    ]
    if not found:
        raise SystemExit(f"pip saved no wheel for {spec}")
    return max(found)[1]


def requires(wheel: Path, extras: set[str]) -> list[Requirement]:
    """The wheel's own Requires-Dist lines that apply on the host for the given extras."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().split("\n\n", 1)[0].splitlines()
    out = []
    for line in lines:
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        envs = [TARGET | {"extra": e} for e in (extras or {""})]
        if req.marker is None or any(req.marker.evaluate(env) for env in envs):
            out.append(req)
    return out


def closure(cutlass: str, quack: str, into: Path) -> list[Path]:
    """Every wheel one pair needs on the host, each read for its own requirements."""
    todo = [Requirement(f"nvidia-cutlass-dsl[cu13]=={cutlass}"), Requirement(f"quack-kernels=={quack}")]
    chosen: dict[str, Path] = {}
    while todo:
        req = todo.pop(0)
        name = canonicalize_name(req.name)
        if name in HOST or name in NOT_CARRIED:
            continue
        if name in chosen:
            have = str(parse_wheel_filename(chosen[name].name)[1])
            if not req.specifier.contains(have, prereleases=True):
                raise SystemExit(f"{cutlass}/{quack}: {name} {have} does not satisfy {req}")
            continue
        chosen[name] = download(f"{req.name}{req.specifier}", into)
        todo += requires(chosen[name], set(req.extras))
    return list(chosen.values())


def main(argv: list[str]) -> int:
    if len(argv) < 2 or any(a.count("/") != 1 for a in argv[1:]):
        print(
            "usage: fetch-cutedsl-wheels.py DEST CUTLASS/QUACK [...]  (e.g. .cutedsl-pins 4.6.0/0.6.1)", file=sys.stderr
        )
        return 2
    dest = Path(argv[0])
    limit = int(os.environ.get("PART_MIB", "29")) * 1024 * 1024
    for sub in ("small", "parts", "pairs"):
        (dest / sub).mkdir(parents=True, exist_ok=True)
    sums = (
        dict(line.split(maxsplit=1)[::-1] for line in (dest / "SHA256SUMS").read_text().splitlines())
        if (dest / "SHA256SUMS").exists()
        else {}
    )
    with tempfile.TemporaryDirectory() as tmp:
        for pair in argv[1:]:
            cutlass, quack = pair.split("/")
            wheels = closure(cutlass, quack, Path(tmp))
            (dest / "pairs" / f"{cutlass}-{quack}.txt").write_text("".join(f"{w.name}\n" for w in wheels))
            for wheel in wheels:
                if wheel.name in sums:
                    continue
                data = wheel.read_bytes()
                sums[wheel.name] = hashlib.sha256(data).hexdigest()
                if len(data) < limit:
                    (dest / "small" / wheel.name).write_bytes(data)
                    continue
                for i in range(0, len(data), limit):
                    (dest / "parts" / f"{wheel.name}.part-{i // limit:02d}").write_bytes(data[i : i + limit])
            print(f"{pair}: {len(wheels)} wheels, {sum(w.stat().st_size for w in wheels) / 2**20:.1f} MiB")
    (dest / "SHA256SUMS").write_text("".join(f"{h}  {n}\n" for n, h in sorted(sums.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
