"""Release index and wheel cache, on synthetic registry documents and fake wheels."""

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from upstream_fakes import V4_MEMBER, fake_pip, fixture_source, make_wheel

from repro_studies.upstream import fetch, members, releases, wheelcache


def test_index_keeps_final_releases_from_the_first_with_an_x86_wheel():
    doc = {
        "releases": {
            "0.20.2": [{"filename": "vllm-0.20.2-cp38-abi3-manylinux_2_35_x86_64.whl", "size": 1}],
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
    found = releases.releases_from_index(json.loads(json.dumps(doc)), first="0.21.0")
    assert [r.version for r in found] == ["0.21.0", "0.33.0"]
    assert found[0].wheel.startswith("vllm-0.21.0-1-") and found[0].sha256 == "ab"
    every = releases.releases_from_index(doc)
    assert [r.version for r in every] == ["0.20.2", "0.21.0", "0.33.0"]
    # pip is asked for exactly the tags the index shows for that release's x86_64 wheel
    assert releases.release_platforms("0.20.2", doc) == ["manylinux_2_35_x86_64"]
    assert releases.release_platforms("0.21.0", doc) == ["manylinux_2_24_x86_64"]
    assert "manylinux_2_35_x86_64" in releases.release_platforms("0.99.0", doc)  # not indexed: every manylinux tag


def test_wheel_platform_tags_come_from_the_file_name():
    assert releases.wheel_platforms("vllm-0.19.1-cp38-abi3-manylinux_2_31_x86_64.whl") == ("manylinux_2_31_x86_64",)
    both = "x-1.0-cp38-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    assert releases.wheel_platforms(both) == ("manylinux_2_17_x86_64", "manylinux2014_x86_64")
    assert releases.is_linux_x86_64(both)
    assert not releases.is_linux_x86_64("vllm-0.20.0-cp38-abi3-manylinux_2_35_aarch64.whl")
    assert not releases.is_linux_x86_64("vllm-0.20.0.tar.gz")


def test_the_first_release_is_found_by_bisection():
    versions = [f"0.{n}.0" for n in range(1, 40)]
    asked = []

    def ships(v):
        asked.append(v)
        return releases.version_key(v) >= (0, 20, 0)

    assert releases.first_release(versions, ships) == "0.20.0"
    assert len(asked) <= 7 and len(set(asked)) == len(asked)
    assert releases.first_release(versions, lambda v: False) is None
    assert releases.first_release(["0.1.0"], lambda v: True) == "0.1.0"


def test_derived_releases_are_recorded_and_reused(tmp_path, monkeypatch):
    wheels = {}
    for v in ("0.18.0", "0.19.1", "0.20.0", "0.20.1", "0.21.0"):
        folder = tmp_path / "w" / v
        folder.mkdir(parents=True)
        files = {"vllm/other.py": "x = 1\n"}
        if v >= "0.20.0":
            files[V4_MEMBER] = fixture_source()
        wheels[v] = make_wheel(folder, v, files)
    calls, tags = [], []
    fake_pip(monkeypatch, wheels, calls, tags)
    doc = {
        "releases": {
            v: [{"filename": f"vllm-{v}-cp38-abi3-manylinux_2_{35 if v.startswith('0.20') else 28}_x86_64.whl"}]
            for v in wheels
        }
    }
    root = tmp_path / "cache"
    derived = fetch.derive_releases(root, doc)
    assert (derived.first, derived.releases) == ("0.20.0", ["0.20.0", "0.20.1", "0.21.0"])
    assert ["manylinux_2_35_x86_64"] in tags  # the index's own tag for a 0.20.x wheel
    assert fetch.recorded_releases(root) == derived
    probes = len(calls)
    again = fetch.derive_releases(root, doc)
    assert again.releases == derived.releases and len(calls) == probes
    # a host without the registry uses the carried record; without one, one line naming the parameter
    assert fetch.gpu_default_releases(root, download=False) == ["0.20.0", "0.20.1", "0.21.0"]
    with pytest.raises(releases.ReleaseListError, match=r"^releases: 'default' needs the registry"):
        fetch.gpu_default_releases(tmp_path / "empty", download=False)


def test_release_lists_resolve_per_profile_and_reject_bad_input():
    assert releases.resolve_releases("default", "gpu", gpu_default=lambda: ["0.20.0", "0.21.0"]) == [
        "0.20.0",
        "0.21.0",
    ]
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
    assert entry.members_of(members.GATHER) == sorted([V4_MEMBER, "vllm/utils/math_utils.py"])
    # every registered set is taken while the wheel is here; nothing outside them is
    assert "vllm/big.py" not in entry.members()
    assert set(entry.members()) == {m for members in entry.sets().values() for m in members}
    assert entry.provenance["sha256"] == wheelcache.sha256_hex(wheel.read_bytes())
    assert entry.provenance["files"][V4_MEMBER]["record"] == wheelcache.record_digest(files[V4_MEMBER].encode())
    assert not list(root.rglob("*.whl"))
    again = wheelcache.ensure_release("0.99.0", root)
    assert calls == ["0.99.0"] and again.provenance == entry.provenance
    assert wheelcache.verify_entry(again) == []
    entry.path_of(V4_MEMBER).write_text("tampered")
    assert wheelcache.verify_entry(entry) == [V4_MEMBER]


def test_processes_asking_for_one_release_at_once_download_it_once(tmp_path, monkeypatch):
    """Two runs (or a test session's notebooks) filling one cache at the same time: one downloads, the other
    waits on the release's lock and finds the entry made."""
    wheel = make_wheel(tmp_path, "0.99.0", {V4_MEMBER: fixture_source()})
    calls = []
    fake_pip(monkeypatch, {"0.99.0": wheel}, calls)
    slow = wheelcache._pip_download

    def download(*args):
        time.sleep(0.5)  # both callers are inside ensure_release while the first downloads
        return slow(*args)

    monkeypatch.setattr(wheelcache, "_pip_download", download)
    root = tmp_path / "cache"
    with ThreadPoolExecutor(max_workers=2) as pool:
        got = list(pool.map(lambda _: wheelcache.ensure_release("0.99.0", root), range(2)))
    assert calls == ["0.99.0"]
    assert got[0].provenance == got[1].provenance and wheelcache.verify_entry(got[0]) == []


def test_the_production_path_set_is_read_as_text_and_never_imported(tmp_path, monkeypatch):
    """The call-site study's member set (the model package, the config modules) is extracted with the wheel,
    each file checked against RECORD, and the gather path's loader does not serve it."""
    from repro_studies.upstream.loader import LoadedRelease
    from repro_studies.upstream.members import PRODUCTION_PATH

    files = {
        V4_MEMBER: fixture_source(),
        "vllm/models/deepseek_v4/nvidia/flashmla.py": "def f():\n    dequantize_and_gather_k_cache()\n",
        "vllm/config/vllm.py": "x = 1\n",
        "vllm/config/model.py": "y = 2\n",
    }
    fake_pip(monkeypatch, {"0.99.0": make_wheel(tmp_path, "0.99.0", files)})
    entry = wheelcache.ensure_release("0.99.0", tmp_path / "cache", sets=(PRODUCTION_PATH,))
    assert entry.members_of(PRODUCTION_PATH) == sorted(
        [V4_MEMBER, "vllm/config/vllm.py", "vllm/models/deepseek_v4/nvidia/flashmla.py"]
    )
    assert entry.read("vllm/config/vllm.py") == "x = 1\n"
    assert LoadedRelease(entry).serves("vllm.config.vllm") == ""
    (tmp_path / "bad").mkdir()
    bad = make_wheel(tmp_path / "bad", "0.98.0", files, corrupt="vllm/config/vllm.py")
    fake_pip(monkeypatch, {"0.98.0": bad})
    miss = wheelcache.ensure_release("0.98.0", tmp_path / "cache", sets=(PRODUCTION_PATH,))
    assert isinstance(miss, wheelcache.CacheMiss) and "vllm/config/vllm.py" in miss.reason


def test_bad_releases_are_misses_with_a_reason(tmp_path, monkeypatch):
    no_module = make_wheel(tmp_path, "0.98.0", {"vllm/other.py": "x = 1\n"})
    (tmp_path / "c").mkdir()
    corrupt = make_wheel(tmp_path / "c", "0.97.0", {V4_MEMBER: fixture_source()}, corrupt=V4_MEMBER)
    fake_pip(monkeypatch, {"0.98.0": no_module, "0.97.0": corrupt})
    root = tmp_path / "cache"
    unknown = wheelcache.ensure_release("9.9.9", root)
    assert (unknown.status, unknown.version) == (wheelcache.MissStatus.UNKNOWN, "9.9.9")
    assert "No matching distribution" in unknown.reason
    missing = wheelcache.ensure_release("0.98.0", root)
    assert missing.status == wheelcache.MissStatus.UNKNOWN and "no DeepSeek-V4 gather module" in missing.reason
    bad = wheelcache.ensure_release("0.97.0", root)
    assert bad.status == wheelcache.MissStatus.BAD_WHEEL and "RECORD" in bad.reason
    offline = wheelcache.ensure_release("0.96.0", root, download=False)
    assert offline.status == wheelcache.MissStatus.DOWNLOAD and "downloads are off" in offline.reason
    # a release that does not ship the set is recorded (no files), so it is not fetched again
    assert sorted(p.name for p in root.iterdir() if (p / "provenance.json").exists()) == ["0.98.0"]
    assert not (root / "0.98.0" / "files").exists()
    assert wheelcache.ensure_release("0.98.0", root, download=False).reason == missing.reason


RESHAPE_MEMBER = "vllm/v1/worker/gpu/attn_utils.py"
SPEC_MEMBER = "vllm/v1/kv_cache_interface.py"


def test_a_set_declared_later_extends_the_entry_from_the_same_wheel(tmp_path, monkeypatch):
    files = {
        V4_MEMBER: fixture_source(),
        RESHAPE_MEMBER: "def _reshape_kv_cache():\n    pass\n",
        SPEC_MEMBER: "class KVCacheSpec:\n    pass\n",
        "vllm/v1/other.py": "y = 2\n",
    }
    wheel = make_wheel(tmp_path, "0.99.0", files)
    calls = []
    fake_pip(monkeypatch, {"0.99.0": wheel}, calls)
    root = tmp_path / "cache"
    gather = wheelcache.ensure_release("0.99.0", root)
    # every registered set is taken while the wheel is here: the reshape study needs no second download
    assert gather.members_of(members.GATHER) == [V4_MEMBER] and gather.ships(members.RESHAPE_CHAIN)
    assert isinstance(wheelcache.ensure_release("0.99.0", root, sets=[members.RESHAPE_CHAIN]), wheelcache.CacheEntry)
    assert calls == ["0.99.0"]
    study = members.MemberSet("test-later", patterns=("vllm/v1/*.py",), anchor=(RESHAPE_MEMBER,))
    both = wheelcache.ensure_release("0.99.0", root, sets=("gather", study))
    assert calls == ["0.99.0", "0.99.0"]
    assert both.members_of(study) == sorted([RESHAPE_MEMBER, SPEC_MEMBER, "vllm/v1/other.py"])
    assert both.members_of(members.GATHER) == [V4_MEMBER] and both.has(V4_MEMBER)
    assert both.provenance["files"][SPEC_MEMBER]["record"] == wheelcache.record_digest(files[SPEC_MEMBER].encode())
    assert wheelcache.verify_entry(both) == []
    # asked again (either set, or both): no download
    assert isinstance(wheelcache.ensure_release("0.99.0", root, sets=[study]), wheelcache.CacheEntry)
    assert isinstance(wheelcache.ensure_release("0.99.0", root, download=False), wheelcache.CacheEntry)
    assert calls == ["0.99.0", "0.99.0"]
    # a carried entry without the asked set, on a host without downloads: a miss that names the set
    offline = wheelcache.ensure_release("0.99.0", root, download=False, sets=[members.MemberSet("test-other")])
    assert offline.status == wheelcache.MissStatus.DOWNLOAD and "test-other" in offline.reason
    # the carry for a host without a registry holds only the sets it needs
    copied = wheelcache.export(tmp_path / "carry", ["gather"], root)
    carried = wheelcache.load_entry("0.99.0", tmp_path / "carry")
    assert copied == ["0.99.0"] and carried.members() == [V4_MEMBER] and wheelcache.verify_entry(carried) == []
    assert not (tmp_path / "carry" / "0.99.0" / "files" / RESHAPE_MEMBER).exists()


def test_a_release_without_the_anchor_is_a_miss_for_that_set_only(tmp_path, monkeypatch):
    study = members.MemberSet(
        "test-reshape-only", members=(RESHAPE_MEMBER,), anchor=(RESHAPE_MEMBER,), description="reshape function"
    )
    wheel = make_wheel(tmp_path, "0.95.0", {RESHAPE_MEMBER: "x = 1\n", "vllm/other.py": "x = 1\n"})
    fake_pip(monkeypatch, {"0.95.0": wheel})
    root = tmp_path / "cache"
    got = wheelcache.ensure_release("0.95.0", root, sets=[study])
    assert isinstance(got, wheelcache.CacheEntry) and got.members() == [RESHAPE_MEMBER]
    gather = wheelcache.ensure_release("0.95.0", root)
    assert gather.status == wheelcache.MissStatus.UNKNOWN and "no DeepSeek-V4 gather module among 2" in gather.reason
    assert wheelcache.ensure_release("0.95.0", root, sets=[study]).members() == [RESHAPE_MEMBER]
    with pytest.raises(KeyError, match="unknown member set 'nope'"):
        wheelcache.ensure_release("0.95.0", root, sets=["nope"])
