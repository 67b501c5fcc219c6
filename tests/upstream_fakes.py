"""Fake vLLM wheels and cache entries built from the synthetic fixture module (never vLLM's code)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from repro_studies.upstream import wheelcache
from repro_studies.upstream.wheelcache import record_digest

FIXTURE = Path(__file__).parent / "fixtures" / "upstream" / "gather_module.py"
V4_MEMBER = "vllm/models/deepseek_v4/common/ops/cache_utils.py"


def fixture_source(**replacements: str) -> str:
    text = FIXTURE.read_text()
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    return text


def make_wheel(folder: Path, version: str, files: dict[str, str], corrupt: str = "") -> Path:
    """A wheel holding ``files`` and a RECORD; ``corrupt`` names a member whose RECORD hash is wrong."""
    path = folder / f"vllm-{version}-cp38-abi3-manylinux_2_28_x86_64.whl"
    record = []
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in files.items():
            zf.writestr(member, text)
            digest = record_digest((text + ("x" if member == corrupt else "")).encode())
            record.append(f"{member},{digest},{len(text.encode())}")
        zf.writestr(f"vllm-{version}.dist-info/RECORD", "\n".join(record) + "\n")
    return path


def fake_pip(monkeypatch, wheels: dict[str, Path], calls: list | None = None, platforms: list | None = None):
    """Route the cache's ``pip download`` to prepared wheels; unknown versions fail as pip does.

    The registry is not asked for platform tags (every tag the fake is given is recorded in ``platforms``).
    """
    import shutil

    from repro_studies.upstream import releases

    monkeypatch.setattr(releases, "release_platforms", lambda version, document=None: ["manylinux_2_28_x86_64"])

    def download(version, dest, timeout_s, platform_tags):
        if calls is not None:
            calls.append(version)
        if platforms is not None:
            platforms.append(list(platform_tags))
        if version not in wheels:
            return None, f"ERROR: No matching distribution found for vllm=={version}"
        target = Path(dest) / wheels[version].name
        shutil.copy(wheels[version], target)
        return target, ""

    monkeypatch.setattr(wheelcache, "_pip_download", download)


def cached_release(tmp_path, monkeypatch, version: str = "0.99.0", source: str | None = None):
    """A cache root holding one fake release of the fixture module."""
    wheel_dir = tmp_path / "wheels"
    wheel_dir.mkdir(exist_ok=True)
    wheel = make_wheel(wheel_dir, version, {V4_MEMBER: source or fixture_source(), "vllm/other.py": "x = 1\n"})
    fake_pip(monkeypatch, {version: wheel})
    root = tmp_path / "cache"
    entry = wheelcache.ensure_release(version, root)
    assert isinstance(entry, wheelcache.CacheEntry), entry
    return root, entry
