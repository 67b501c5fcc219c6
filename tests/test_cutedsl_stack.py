"""The CuTe-DSL stack a release pins, read from its wheel's own METADATA in the module cache, beside the stack
that ran (fake wheels; no registry)."""

from __future__ import annotations

from upstream_fakes import V4_MEMBER, fake_pip, fixture_source, make_wheel

from repro_studies.upstream import cutedsl_stack as stack
from repro_studies.upstream import wheelcache
from repro_studies.upstream.members import GATHER, METADATA

METADATA_TEXT = """Metadata-Version: 2.4
Name: vllm
Version: {version}
Requires-Dist: torch==2.14.0
Requires-Dist: nvidia-cutlass-dsl==4.8.0
Requires-Dist: quack_kernels==0.6.5; platform_machine == "x86_64"
Requires-Dist: pytest; extra == "test"

The long description, whose lines are not headers: Requires-Dist: nothing==1.0
"""


def cache(tmp_path, monkeypatch, version="0.99.0", metadata=True):
    files = {V4_MEMBER: fixture_source()}
    if metadata:
        files[f"vllm-{version}.dist-info/METADATA"] = METADATA_TEXT.format(version=version)
    wheel_dir = tmp_path / "wheels"
    wheel_dir.mkdir(exist_ok=True)
    fake_pip(monkeypatch, {version: make_wheel(wheel_dir, version, files)})
    return tmp_path / "cache"


def test_the_wheels_requirements_come_from_its_record_checked_metadata(tmp_path, monkeypatch):
    root = cache(tmp_path, monkeypatch)
    entry = wheelcache.ensure_release("0.99.0", root, sets=(GATHER, METADATA))
    assert entry.members_of(METADATA) == ["vllm-0.99.0.dist-info/METADATA"]
    assert entry.provenance["python_files"] == 1  # the metadata is kept, not counted as a module
    found = wheelcache.requirements(entry)
    assert found["nvidia-cutlass-dsl"] == "nvidia-cutlass-dsl==4.8.0"
    assert found["quack-kernels"] == 'quack_kernels==0.6.5; platform_machine == "x86_64"'  # names normalised
    assert "nothing" not in found  # the description's text is no header


def test_rows_say_which_stack_ran_and_which_the_release_pins(tmp_path, monkeypatch):
    root = cache(tmp_path, monkeypatch)
    pins = stack.pinned("0.99.0", root)
    assert stack.pinned_pair(pins) == ("4.8.0", "0.6.5")
    same = {"nvidia-cutlass-dsl": "4.8.0", "quack-kernels": "0.6.5"}
    assert stack.describe("0.99.0", same, pins) == (
        "ran nvidia-cutlass-dsl 4.8.0, quack-kernels 0.6.5; vLLM 0.99.0 pins nvidia-cutlass-dsl==4.8.0, "
        'quack_kernels==0.6.5; platform_machine == "x86_64"'
    )
    older = {"nvidia-cutlass-dsl": "4.5.2", "quack-kernels": None}
    assert stack.describe("0.99.0", older, pins).startswith("ran nvidia-cutlass-dsl 4.5.2, no quack-kernels; ")
    assert stack.describe("0.99.0", older, pins).endswith(" (differs)")
    assert stack.describe("0.99.0", None, pins).startswith("not run; vLLM 0.99.0 pins nvidia-cutlass-dsl==4.8.0")


def test_a_cache_without_the_wheels_metadata_says_the_pins_are_unknown(tmp_path, monkeypatch):
    root = cache(tmp_path, monkeypatch, metadata=False)
    assert stack.pinned("0.99.0", root) is None
    text = stack.describe("0.99.0", {"nvidia-cutlass-dsl": "4.8.0", "quack-kernels": "0.6.5"}, None)
    assert text.endswith("vLLM 0.99.0's pins unknown (the module cache holds no wheel metadata)")


def test_a_pair_is_the_lowest_version_each_requirement_admits():
    assert stack.lowest_allowed("nvidia-cutlass-dsl[cu13]==4.5.2") == "4.5.2"
    assert stack.lowest_allowed("quack-kernels>=0.3.3") == "0.3.3"
    assert stack.lowest_allowed("quack-kernels>=0.3.3,!=0.3.3") is None  # the floor itself is excluded
    assert stack.lowest_allowed("quack-kernels<0.5") is None  # open below: no version to pick
    assert stack.lowest_allowed("") is None
    pins = {"nvidia-cutlass-dsl": "nvidia-cutlass-dsl[cu13]==4.6.0", "quack-kernels": "quack-kernels>=0.4.0"}
    assert stack.pinned_pair(pins) == ("4.6.0", "0.4.0")
    assert stack.pinned_pair({**pins, "quack-kernels": ""}) is None  # a release that does not ask for quack
    assert stack.pinned_pair(None) is None


def test_a_stack_matches_when_each_version_satisfies_the_release_requirement():
    pins = {"nvidia-cutlass-dsl": "nvidia-cutlass-dsl[cu13]==4.5.2", "quack-kernels": "quack-kernels>=0.3.3"}
    assert stack.matches({"nvidia-cutlass-dsl": "4.5.2", "quack-kernels": "0.6.5"}, pins) is True
    assert stack.matches({"nvidia-cutlass-dsl": "4.8.0", "quack-kernels": "0.3.3"}, pins) is False
    assert stack.matches({"nvidia-cutlass-dsl": "4.5.2", "quack-kernels": None}, pins) is False
    assert stack.matches({"nvidia-cutlass-dsl": "4.5.2", "quack-kernels": "0.3.3"}, None) is None


def test_the_command_lists_each_pinned_pair_with_its_releases(tmp_path, monkeypatch, capsys):
    root = cache(tmp_path, monkeypatch)
    monkeypatch.setenv("REPRO_VLLM_CACHE", str(root))
    assert stack.main(["0.99.0"]) == 0
    assert capsys.readouterr().out.split() == ["4.8.0", "0.6.5", "0.99.0"]
    assert stack.main(["--no-download", "0.98.0"]) == 1  # no metadata for it in the cache: named, not guessed
    assert "0.98.0" in capsys.readouterr().err
