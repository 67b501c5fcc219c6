"""The weekly release check (repro_studies.upstream.newer) against hand-made registry answers shaped like
the registry's JSON document for vllm, and against the committed evidence."""

import datetime as dt
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from repro_studies.upstream import newer
from repro_studies.upstream.releases import version_key

ROOT = Path(__file__).resolve().parents[1]


def wheel(version: str, platform: str = "manylinux_2_28_x86_64", yanked: bool = False) -> dict:
    name = f"vllm-{version}-cp38-abi3-{platform}.whl"
    return {
        "filename": name,
        "packagetype": "bdist_wheel",
        "size": 300_000_000,
        "digests": {"sha256": hashlib.sha256(name.encode()).hexdigest()},
        "upload_time": "2026-11-16T18:00:00",
        "yanked": yanked,
    }


def sdist(version: str, yanked: bool = False) -> dict:
    return {
        "filename": f"vllm-{version}.tar.gz",
        "packagetype": "sdist",
        "size": 20_000_000,
        "digests": {"sha256": "0" * 64},
        "upload_time": "2026-11-16T18:00:00",
        "yanked": yanked,
    }


def registry_answer(extra: dict[str, list[dict]] | None = None) -> dict:
    """The registry's document for vllm through 0.33.0, with ``extra`` releases added."""
    releases = {v: [sdist(v), wheel(v)] for v in ("0.31.0", "0.32.0", "0.33.0")}
    releases["0.3.0"] = [sdist("0.3.0"), wheel("0.3.0")]  # sorts after 0.33.0 as text, before it as a version
    releases.update(extra or {})
    return {"info": {"name": "vllm", "version": max(releases, key=lambda v: len(v))}, "releases": releases}


ON = dt.date(2026, 12, 7)


def test_nothing_new():
    answer = newer.check(registry_answer(), "0.33.0", on=ON)
    assert not answer.found and answer.newer == () and answer.skipped == ()
    assert answer.lines() == ["no release newer than 0.33.0 (registry checked 2026-12-07)"]
    assert answer.record()["newer"] == [] and answer.record()["covered_through"] == "0.33.0"


def test_one_new_release():
    answer = newer.check(registry_answer({"0.34.0": [sdist("0.34.0"), wheel("0.34.0")]}), "0.33.0", on=ON)
    assert answer.found and [r.version for r in answer.newer] == ["0.34.0"]
    assert answer.newer[0].wheel == "vllm-0.34.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    assert answer.lines()[0] == "1 release newer than 0.33.0:"
    assert answer.lines()[1].startswith("0.34.0 (uploaded 2026-11-16, vllm-0.34.0-")
    assert answer.newest_on_registry == "0.34.0"


def test_a_release_the_evidence_already_covers_is_not_new():
    answer = newer.check(registry_answer({"0.34.0": [wheel("0.34.0")]}), "0.34.0", on=ON)
    assert not answer.found


@pytest.mark.parametrize(
    "version,files,reason",
    [
        ("0.34.0rc1", [sdist("0.34.0rc1"), wheel("0.34.0rc1")], "a pre-release"),
        ("0.34.0.dev3", [wheel("0.34.0.dev3")], "a pre-release"),
        ("0.34.0", [sdist("0.34.0", yanked=True), wheel("0.34.0", yanked=True)], "yanked"),
        ("0.34.0", [sdist("0.34.0"), wheel("0.34.0", yanked=True)], "its x86_64 Linux wheels are yanked"),
        ("0.34.0", [sdist("0.34.0")], "no x86_64 Linux wheel"),
        ("0.34.0", [sdist("0.34.0"), wheel("0.34.0", "manylinux_2_28_aarch64")], "no x86_64 Linux wheel"),
        ("0.34.0", [wheel("0.34.0", "macosx_11_0_arm64")], "no x86_64 Linux wheel"),
    ],
)
def test_a_release_the_studies_cannot_test_is_named_and_not_counted(version, files, reason):
    answer = newer.check(registry_answer({version: files}), "0.33.0", on=ON)
    assert not answer.found
    assert answer.skipped == (newer.Skipped(version, reason),)
    nothing_new = newer.check(registry_answer(), "0.33.0", on=ON).lines()
    assert answer.lines() == [*nothing_new, f"not counted: {version} ({reason})"]


def test_older_pre_releases_and_yanked_releases_are_not_mentioned():
    extra = {"0.33.0rc1": [wheel("0.33.0rc1")], "0.32.1": [wheel("0.32.1", yanked=True)]}
    assert newer.check(registry_answer(extra), "0.33.0", on=ON).skipped == ()


def test_several_new_releases_in_version_order():
    extra = {v: [wheel(v)] for v in ("0.35.0", "0.34.0", "0.34.1", "0.35.0rc1")}
    answer = newer.check(registry_answer(extra), "0.33.0", on=ON)
    assert [r.version for r in answer.newer] == ["0.34.0", "0.34.1", "0.35.0"]
    assert [s.version for s in answer.skipped] == ["0.35.0rc1"]
    assert answer.lines()[0] == "3 releases newer than 0.33.0:"


def run_folder(root: Path, name: str, tables: dict[str, list[str]]) -> Path:
    folder = root / name
    (folder / "results").mkdir(parents=True)
    for table, releases in tables.items():
        rows = "".join(f"x,{r}\n" for r in releases)
        (folder / "results" / table).write_text("notebook,release\n" + rows)
    return folder


def test_covered_through_is_the_newest_release_every_folder_holds(tmp_path):
    cpu = run_folder(tmp_path, "cpu", {"05-a.csv": ["0.9.0", "0.34.0", "0.10.0"]})
    gpu = run_folder(tmp_path, "gpu", {"04-a.csv": ["0.33.0", "0.32.0"], "04-b.csv": ["0.31.0"]})
    assert newer.covered_through([cpu]) == "0.34.0"
    assert newer.covered_through([cpu, gpu]) == "0.33.0"  # 0.34.0's GPU rows are not committed yet


def test_covered_through_reads_only_release_numbers(tmp_path):
    folder = run_folder(tmp_path, "f", {"a.csv": ["0.33.0", "", "0.40.0rc1", "all"]})
    (folder / "results" / "b.csv").write_text("notebook,version\nx,9.9.9\n")
    assert newer.covered_through([folder]) == "0.33.0"


def test_a_folder_without_release_tables_is_refused(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(newer.EvidenceError, match=r"^--against: .*empty holds no results/\*\.csv"):
        newer.covered_through([empty])


def test_every_committed_evidence_folder_holds_the_release_it_covers_through():
    through = newer.covered_through([ROOT / p for p in newer.EVIDENCE])
    assert all(through in newer.releases_in(ROOT / folder) for folder in newer.EVIDENCE)


def test_the_committed_record_names_a_release_the_evidence_covers():
    """The record the README's "checked through" reads: the release is the evidence's (the check that wrote it
    read the same folders), and the date is a date."""
    record = json.loads((ROOT / newer.RECORD).read_text())
    assert record["covered_through"] == newer.covered_through([ROOT / p for p in record["evidence"]])
    assert dt.date.fromisoformat(record["checked_on"])
    assert record["evidence"] == list(newer.EVIDENCE)
    assert all(version_key(v) > version_key(record["covered_through"]) for v in record["newer"])


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "repro_studies.upstream.newer", *args], cwd=cwd, capture_output=True, text=True
    )


@pytest.fixture
def evidence(tmp_path):
    return run_folder(tmp_path, "evidence", {"05-gather-dispatch.csv": ["0.32.0", "0.33.0"]})


def test_the_command_exits_0_when_nothing_is_newer(tmp_path, evidence):
    index = tmp_path / "index.json"
    index.write_text(json.dumps(registry_answer({"0.34.0rc1": [wheel("0.34.0rc1")]})))
    record, out = tmp_path / "record.json", tmp_path / "github-output"
    proc = cli("--against", str(evidence), "--index", str(index), "--record", str(record), "--github-output", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("no release newer than 0.33.0 (registry checked ")
    assert proc.stdout.splitlines()[1] == "not counted: 0.34.0rc1 (a pre-release)"
    assert out.read_text() == "found=false\nreleases=\n"
    written = json.loads(record.read_text())
    assert written["covered_through"] == "0.33.0" and written["newer"] == []
    assert written["checked_on"] == dt.datetime.now(dt.UTC).date().isoformat()


def test_the_command_exits_1_naming_the_new_releases(tmp_path, evidence):
    index = tmp_path / "index.json"
    index.write_text(json.dumps(registry_answer({v: [wheel(v)] for v in ("0.34.0", "0.34.1")})))
    out = tmp_path / "github-output"
    proc = cli("--against", str(evidence), "--index", str(index), "--github-output", str(out))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "2 releases newer than 0.33.0:"
    assert [line.split()[0] for line in lines[1:]] == ["0.34.0", "0.34.1"]
    assert out.read_text() == "found=true\nreleases=0.34.0,0.34.1\n"


def test_the_command_refuses_unreadable_input_with_one_line(tmp_path, evidence):
    proc = cli("--against", str(tmp_path / "missing"), "--index", str(tmp_path / "index.json"))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [proc.stderr.strip()] and "--against:" in proc.stderr
    proc = cli("--against", str(evidence), "--index", str(tmp_path / "index.json"))
    assert proc.returncode == 2 and proc.stderr.startswith("error: --index: ") and len(proc.stderr.splitlines()) == 1
