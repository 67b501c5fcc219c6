"""The README's first screen: its answer (a sentence per bug, the release check's date, one table of both bugs) and
``docs/who-is-affected.md`` are what :mod:`repro_studies.report.readme` writes from the committed data, so a change of
the data or the code that is not re-rendered fails here; the README stays small, carries no zero-width character, and
every relative link of it and of ``docs/`` opens a file of the repository (and a heading that exists). Those tests
read committed data: they are the audit's (``make audit``). The sentences follow the facts they are given: a latent
bug 1, a reached bug 2 and a release check with nothing newer each change the words."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pandas as pd
import pytest

from repro_studies.analysis import affected as analysis
from repro_studies.analysis import reshape_chain as bug1
from repro_studies.registry import GPU_FAMILY_NAMES, GPU_FAMILY_SETTINGS, Bug1Answer, Bug2Answer, CellOutcome, Cutlass
from repro_studies.report import readme

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: GitHub's limit is far above; the README is an answer and a map, the reference is in docs/.
README_LIMIT_BYTES = 15 * 1024
ZERO_WIDTH = re.compile("[\u200b-\u200f\u2060\ufeff]")
#: A Markdown link's target (inline links; images too).
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.fixture(scope="module")
def answer():
    return readme.read(ROOT)


@pytest.fixture(scope="module")
def block(answer):
    return "\n".join([readme.START, "", readme.answer_text(answer), "", readme.END])


@pytest.mark.audit
def test_the_readme_answer_and_the_detail_are_what_the_code_writes_from_the_committed_data(answer, block):
    text = README.read_text()
    start, end = text.index(readme.START), text.index(readme.END) + len(readme.END)
    assert text[start:end] == block, "re-render it: python -m repro_studies.report.readme README.md"
    assert (ROOT / readme.DETAIL).read_text() == readme.detail_document(answer=answer), (
        "python -m repro_studies.report.readme"
    )


@pytest.mark.audit
def test_the_readme_is_small_and_free_of_zero_width_characters():
    raw = README.read_bytes()
    assert len(raw) < README_LIMIT_BYTES, f"README.md is {len(raw)} bytes; reference material belongs in docs/"
    for path in (README, *sorted((ROOT / "docs").glob("*.md"))):
        found = ZERO_WIDTH.findall(path.read_text())
        assert not found, f"{path.name}: {len(found)} zero-width characters (copy and grep break on them)"


def paragraphs(text: str) -> list[str]:
    """The paragraphs of Markdown text; none of the generated ones has a space before its punctuation."""
    found = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    for p in found:
        assert not re.search(r" [,;:.)]", p.replace(" | ", "")), p
    return found


@pytest.mark.audit
def test_the_first_screen_is_the_title_a_short_line_and_both_sentences():
    """Title, at most one short line, then the generated answer: bug 1's sentence, bug 2's, the release check,
    each one paragraph naming its pull request; the table follows them (the browser test measures the pixels)."""
    text = README.read_text()
    head, _, rest = text.partition(readme.START)
    title, *intro = paragraphs(head)
    assert title.startswith("# ") and len(intro) <= 1 and all(len(p) <= 160 and "\n" not in p for p in intro)
    first, second, checked, table = paragraphs(rest.partition(readme.END)[0])[:4]
    assert first.startswith("**Bug 1**") and "vllm-project/vllm#43988" in first and first.endswith(".")
    assert second.startswith("**Bug 2**") and "vllm-project/vllm#55109" in second and second.endswith(".")
    assert checked.startswith("Checked through vLLM ") and table.startswith("| ")
    assert all("\n" not in p for p in (first, second, checked))  # one paragraph each


@pytest.mark.audit
def test_the_sentences_say_what_the_committed_tables_hold(answer, block):
    """Figures of the sentences against the tables they come from (not against typed expectations)."""
    first, second, checked = paragraphs(block)[1:4]
    reached = answer.bug1.answered(Bug1Answer.REACHED)
    for g in reached:
        assert f"the {g.runners[0]} model runner of {readme.ranges(g.releases, answer.bug1.releases)}" in first
        for env, _ in g.switches:
            assert f"`{env}`" in first
    if reached:
        assert f"--block-size {reached[0].failing[0]}" in first
    assert f"`--kv-cache-dtype {readme.BUG1_KV_CACHE_DTYPE}" in first
    for e in answer.bug2.present:
        assert f"{readme.either(e.platforms, 'and')} (" in second
    if len(answer.bug2.stock.get(Bug2Answer.LATENT, [])) == len(answer.bug2.releases):
        assert "is latent in every release read" in second and "forks, plugins and direct callers" in second
    check = answer.check
    assert checked.startswith(f"Checked through vLLM {check.covered_through} on {check.checked_on} ")
    assert all(v in checked for v in check.newer)


@pytest.mark.audit
def test_the_table_holds_both_bugs_in_at_most_ten_rows_each_linking_its_rows(block):
    rows = [line for line in block.splitlines() if line.startswith("| ")][1:]
    assert 0 < len(rows) <= readme.TABLE_ROWS
    assert [r.split(" | ")[0][2:7] for r in rows] == sorted(r.split(" | ")[0][2:7] for r in rows)  # bug 1, then 2
    assert {r[2:7] for r in rows} == {"**1**", "**2**"}
    detail = (ROOT / readme.DETAIL).read_text()
    headings = {h.lower().replace(" ", "-") for h in re.findall(r"^## (.+)$", detail, re.M)}
    assert headings == {f"row-{i}" for i in range(1, len(rows) + 1)} | {"not-served"}
    for i, row in enumerate(rows, 1):
        assert row.endswith(f"| [{i}]({readme.DETAIL}#row-{i}) |")


def markdown_files() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.audit
@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_opens_a_file_of_the_repository_and_a_heading_that_exists(page):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+://", target) or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{page.name}: {target} opens nothing"
        assert ROOT in resolved.parents or resolved == ROOT, f"{page.name}: {target} leaves the repository"
        if anchor and resolved.suffix == ".md":
            slugs = {_slug(h) for h in re.findall(r"^#+ (.+)$", resolved.read_text(), re.M)}
            assert anchor in slugs, f"{page.name}: {target}: no heading #{anchor}"
        elif anchor:
            assert re.fullmatch(r"L\d+", anchor), f"{page.name}: {target}: a file link's anchor is a line"
            assert int(anchor[1:]) <= len(resolved.read_text().splitlines()), f"{page.name}: {target}: no such line"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_command_refuses_a_file_without_the_markers_before_any_work(tmp_path, capsys):
    page = tmp_path / "README.md"
    page.write_text("# A README without the answer's markers\n")
    assert readme.main([str(page)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: README: ") and readme.START in err and len(err.splitlines()) == 1
    assert page.read_text() == "# A README without the answer's markers\n" and not (tmp_path / "docs").exists()
    assert readme.main([str(page), "extra"]) == 2


@pytest.mark.audit
def test_the_sources_are_the_committed_runs_and_the_release_checks_record():
    from repro_studies.upstream import newer

    assert readme.RELEASE_CHECK == newer.RECORD
    assert readme.DISPATCH_RUN in newer.EVIDENCE
    for path in (readme.BUG1_RUN, readme.DISPATCH_RUN, readme.VERDICTS, readme.RELEASE_CHECK):
        assert (ROOT / path).exists(), path


def test_every_gpu_family_is_named_once_as_platform_and_cutlass_state():
    from repro_studies.upstream import platforms

    assert set(GPU_FAMILY_SETTINGS) == set(GPU_FAMILY_NAMES) == {f.key for f in platforms.FAMILIES}
    for family in platforms.FAMILIES:
        setting = GPU_FAMILY_SETTINGS[family.key]
        assert setting.cutlass is Cutlass(family.cutlass)
        assert setting.platform == GPU_FAMILY_NAMES[family.key].split()[0]


# ---- the words follow the facts --------------------------------------------------------------------------------


def group(answer, runners, releases, **changes) -> bug1.RunnerReach:
    base = {
        "answer": answer,
        "runners": runners,
        "releases": releases,
        "stock": (),
        "switches": (),
        "failing": (),
        "outcomes": (),
        "errors": (),
        "definitions": ("v.py:Runner._reshape",),
        "counts": ("kv_cache_spec.block_size // kernel_block_size",),
        "positions": (),
    }
    return bug1.RunnerReach(**{**base, **changes})


def made(groups, present, stock, newer=()) -> readme.Answer:
    releases = ("1.0.0", "1.1.0", "1.2.0")
    reach = bug1.Bug1Reach(releases, tuple(groups), (256,), (), ("default", "16", "512"))
    bug2 = readme.Bug2Facts(releases, tuple(present), (), ("Triton",), stock, 11)
    check = readme.ReleaseCheck("2030-01-02", "1.2.0", tuple(newer), "1.2.0")
    empty = pd.DataFrame(columns=analysis.COMPACT_COLUMNS)
    return readme.Answer(reach, pd.DataFrame(), bug2, pd.DataFrame(), empty, pd.DataFrame(), check)


def test_a_latent_bug_1_and_a_reached_bug_2_are_said_so_in_plain_words():
    latent = group(Bug1Answer.LATENT, ("V1",), ("1.0.0", "1.1.0", "1.2.0"), stock=("1.0.0", "1.1.0", "1.2.0"))
    exposure = analysis.Exposure("V4", ("ROCm",), ("1.1.0", "1.2.0"), ())
    text = readme.answer_text(
        made([latent], [exposure], {Bug2Answer.REACHED: ["1.2.0"], Bug2Answer.LATENT: ["1.0.0", "1.1.0"]})
    )
    first, second, checked = paragraphs(text)[:3]
    assert "is reached by no configuration of vLLM 1.0.0 – 1.2.0" in first
    assert "latent in the V1 model runner of 1.0.0 – 1.2.0 (the default)" in first
    assert "only forks, plugins and direct callers of `Runner._reshape` can still hit it" in first
    assert "is reached in vLLM 1.2.0 and latent in vLLM 1.0.0, 1.1.0: in vLLM 1.0.0, 1.1.0 none of" in second
    assert "in vLLM 1.2.0 the release's own runner code hands the gather a column-narrowed block table" in second
    assert "the buggy Triton gather runs on the prefill path of V4 on ROCm (1.1.0, 1.2.0)" in second
    assert checked == (
        "Checked through vLLM 1.2.0 on 2030-01-02 by the weekly release check: every evidence table holds each "
        "release through 1.2.0."
    )


def test_a_reached_bug_1_names_what_a_user_types_and_what_the_view_does():
    raises = group(
        Bug1Answer.REACHED,
        ("V1",),
        ("1.0.0", "1.1.0"),
        stock=("1.0.0",),
        switches=(("VLLM_USE_V2_MODEL_RUNNER=0", ("1.1.0",)),),
        failing=("512",),
        outcomes=(CellOutcome.RAISES,),
        errors=("RuntimeError",),
    )
    aliases = dataclasses.replace(
        raises,
        runners=("V2",),
        releases=("1.2.0",),
        stock=(),
        switches=(("VLLM_USE_V2_MODEL_RUNNER=1", ("1.2.0",)),),
        failing=("16", "512"),
        outcomes=(CellOutcome.OUTSIDE_PAGE,),
        errors=(),
    )
    cutlass = analysis.Setting((Cutlass.ABSENT, Cutlass.IMPORT_FAILS), ("TP 16",), ("1.2.0",))
    exposure = analysis.Exposure("V4", ("SM90", "SM100"), ("1.0.0",), (cutlass,))
    text = readme.answer_text(
        made([raises, aliases], [exposure], {Bug2Answer.LATENT: ["1.0.0", "1.1.0", "1.2.0"]}, ["1.3.0"])
    )
    first, second, checked = paragraphs(text)[:3]
    assert "is reached in vLLM 1.0.0 – 1.2.0: serving DeepSeek-V4 with `--kv-cache-dtype fp8`" in first
    assert "makes the KV-cache reshape raise `RuntimeError` or gives a KV-cache view that silently aliases" in first
    assert (
        "the V1 model runner of 1.0.0, 1.1.0 (the default in 1.0.0; `VLLM_USE_V2_MODEL_RUNNER=0` in 1.1.0) at "
        "`--block-size` 512 and the V2 model runner of 1.2.0 (`VLLM_USE_V2_MODEL_RUNNER=1`) at `--block-size` 16 or "
        "512" in first
    )
    assert "the default block size (256) fits in every release." in first
    assert "SM90 and SM100 (1.0.0; 1.2.0 without a working `nvidia-cutlass-dsl` at TP 16)" in second
    assert "is latent in every release read, 1.0.0 – 1.2.0: none of the 11 runner configurations" in second
    assert checked.endswith("; 1.3.0 (newer, on PyPI) is not yet in all of them.")
    table = [line for line in text.splitlines() if line.startswith("| **1**")]
    assert table[0].split(" | ")[2] == "raises at `--block-size` 512; reached"
    assert table[1].split(" | ")[2] == "aliases bytes outside a block's page at `--block-size` 16, 512; reached"


def test_the_rewritten_views_are_said_to_have_no_count_with_the_block_sizes_their_own_check_refuses():
    reached = group(
        Bug1Answer.REACHED,
        ("V1",),
        ("1.0.0",),
        stock=("1.0.0",),
        failing=("512",),
        outcomes=(CellOutcome.RAISES,),
        errors=("RuntimeError",),
    )
    views = group(
        Bug1Answer.VIEWS_REFUSE,
        ("V2",),
        ("1.1.0", "1.2.0"),
        stock=("1.1.0", "1.2.0"),
        definitions=("v1/kv_cache_interface.py:create_kv_cache_views",),
        counts=("",),
        refusals=((("512",), ("1.1.0",)), (("16",), ("1.2.0",))),
    )
    text = readme.answer_text(made([reached, views], [], {Bug2Answer.LATENT: ["1.0.0", "1.1.0", "1.2.0"]}))
    first = paragraphs(text)[0]
    assert (
        "; vLLM 1.1.0, 1.2.0 have no reshape: the runners view the cache with `create_kv_cache_views`, which has no "
        "such count and whose own check refuses `--block-size` 512 in 1.1.0 and `--block-size` 16 in 1.2.0; the "
        "default block size (256) fits in every release." in first
    )
    row = next(line for line in text.splitlines() if line.startswith("| **1**: DeepSeek-V4, V2"))
    assert row.split(" | ")[1:3] == [
        "`create_kv_cache_views`: no count",
        f"its own check refuses `--block-size` 512 in 1.1.0, `--block-size` 16 in 1.2.0, the rest fit; "
        f"{Bug1Answer.VIEWS_REFUSE}",
    ]
