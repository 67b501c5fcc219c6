"""Release index and wheel cache, on synthetic registry documents and fake wheels."""

import json

import pytest
from upstream_fakes import V4_MEMBER, fake_pip, fixture_source, make_wheel

from repro.upstream import releases, wheelcache


def test_index_keeps_final_releases_from_the_first_with_an_x86_wheel():
    doc = {
        "releases": {
            "0.20.2": [{"filename": "vllm-0.20.2-cp38-abi3-manylinux_2_28_x86_64.whl", "size": 1}],
            "0.21.0": [
                {"filename": "vllm-0.21.0-cp38-abi3-manylinux_2_24_x86_64.whl", "size": 1},
                {
                    "filename": "vllm-0.21.0-1-cp38-abi3-manylinux_2_24_x86_64.whl",
                    "size": 2,
                    "digests": {"sha256": "ab"},
                },
            ],
            "0.22.0rc1": [{"filename": "vllm-0.22.0rc1-cp38-abi3-manylinux_2_28_x86_64.whl", "size": 1}],
            "0.22.1": [{"filename": "vllm-0.22.1-cp38-abi3-manylinux_2_28_aarch64.whl", "size": 1}],
            "0.23.0": [{"filename": "vllm-0.23.0-cp38-abi3-manylinux_2_28_x86_64.whl", "size": 3, "yanked": True}],
            "0.33.0": [{"filename": "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl", "size": 4}],
        }
    }
    found = releases.releases_from_index(json.loads(json.dumps(doc)))
    assert [r.version for r in found] == ["0.21.0", "0.33.0"]
    assert found[0].wheel.startswith("vllm-0.21.0-1-") and found[0].sha256 == "ab"


def test_release_lists_resolve_per_profile_and_reject_bad_input():
    assert releases.resolve_releases("default", "gpu") == list(releases.DEFAULT_RELEASES)
    assert releases.resolve_releases("default", "cpu") == list(releases.CPU_DEFAULT_RELEASES)
    assert releases.resolve_releases("0.33.0, 0.22.0,0.33.0", "cpu") == ["0.33.0", "0.22.0"]
    assert releases.resolve_releases("all", "gpu", ["0.21.0"]) == ["0.21.0"]
    for bad in ("latest", "", [], ["0.33"] * 0 + ["v0.33.0"]):
        with pytest.raises(releases.ReleaseListError, match=r"^releases: "):
            releases.resolve_releases(bad, "cpu")
    with pytest.raises(releases.ReleaseListError, match="registry index"):
        releases.resolve_releases("all", "cpu", None)


def test_a_wheel_is_downloaded_once_and_only_gather_modules_and_helpers_are_kept(tmp_path, monkeypatch):
    files = {
        V4_MEMBER: fixture_source(),
        "vllm/utils/math_utils.py": "def cdiv(a, b):\n    return -(-a // b)\n",
        "vllm/models/deepseek_v4/other.py": "block_table = None  # gather\n",
        "vllm/big.py": "y = 2\n",
    }
    wheel = make_wheel(tmp_path, "0.99.0", files)
    calls = []
    fake_pip(monkeypatch, {"0.99.0": wheel}, calls)
    root = tmp_path / "cache"
    entry = wheelcache.ensure_release("0.99.0", root)
    assert entry.members() == sorted([V4_MEMBER, "vllm/utils/math_utils.py"])
    assert entry.provenance["sha256"] == wheelcache.sha256_hex(wheel.read_bytes())
    assert entry.provenance["files"][V4_MEMBER]["record"] == wheelcache.record_digest(files[V4_MEMBER].encode())
    assert not list(root.rglob("*.whl"))
    again = wheelcache.ensure_release("0.99.0", root)
    assert calls == ["0.99.0"] and again.provenance == entry.provenance
    assert wheelcache.verify_entry(again) == []
    entry.path_of(V4_MEMBER).write_text("tampered")
    assert wheelcache.verify_entry(entry) == [V4_MEMBER]


def test_the_production_path_files_are_kept_apart_for_reading(tmp_path, monkeypatch):
    """The call-site study's files (the model package, the config modules) are extracted under study/, each
    checked against RECORD, and never become importable members of the release."""
    files = {
        V4_MEMBER: fixture_source(),
        "vllm/models/deepseek_v4/nvidia/flashmla.py": "def f():\n    dequantize_and_gather_k_cache()\n",
        "vllm/config/vllm.py": "x = 1\n",
        "vllm/config/model.py": "y = 2\n",
    }
    fake_pip(monkeypatch, {"0.99.0": make_wheel(tmp_path, "0.99.0", files)})
    entry = wheelcache.ensure_release("0.99.0", tmp_path / "cache")
    assert entry.members() == [V4_MEMBER]
    assert entry.study_members() == sorted(
        [V4_MEMBER, "vllm/config/vllm.py", "vllm/models/deepseek_v4/nvidia/flashmla.py"]
    )
    assert entry.read_study("vllm/config/vllm.py") == "x = 1\n"
    (tmp_path / "bad").mkdir()
    bad = make_wheel(tmp_path / "bad", "0.98.0", files, corrupt="vllm/config/vllm.py")
    fake_pip(monkeypatch, {"0.98.0": bad})
    miss = wheelcache.ensure_release("0.98.0", tmp_path / "cache")
    assert isinstance(miss, wheelcache.CacheMiss) and "vllm/config/vllm.py: RECORD says" in miss.reason


def test_bad_releases_are_misses_with_a_reason(tmp_path, monkeypatch):
    no_module = make_wheel(tmp_path, "0.98.0", {"vllm/other.py": "x = 1\n"})
    (tmp_path / "c").mkdir()
    corrupt = make_wheel(tmp_path / "c", "0.97.0", {V4_MEMBER: fixture_source()}, corrupt=V4_MEMBER)
    fake_pip(monkeypatch, {"0.98.0": no_module, "0.97.0": corrupt})
    root = tmp_path / "cache"
    unknown = wheelcache.ensure_release("9.9.9", root)
    assert (unknown.status, unknown.version) == (wheelcache.MISS_UNKNOWN, "9.9.9")
    assert "No matching distribution" in unknown.reason
    missing = wheelcache.ensure_release("0.98.0", root)
    assert missing.status == wheelcache.MISS_UNKNOWN and "no DeepSeek-V4 gather module" in missing.reason
    bad = wheelcache.ensure_release("0.97.0", root)
    assert bad.status == wheelcache.MISS_BAD_WHEEL and "RECORD" in bad.reason
    offline = wheelcache.ensure_release("0.96.0", root, download=False)
    assert offline.status == wheelcache.MISS_DOWNLOAD and "downloads are off" in offline.reason
    assert not [p for p in root.iterdir() if p.name != ".gitkeep"] or all(
        not (p / "provenance.json").exists() for p in root.iterdir()
    )
