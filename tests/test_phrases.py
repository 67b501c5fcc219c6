"""Notebooks 01 and 02's first cell prints what it runs on through the report's phrases (templates/phrases.md.j2)."""

from __future__ import annotations

from dataclasses import replace

from repro.core.analysis.verdict import (
    Behaviour,
    Control,
    Coverage,
    RecordedFailure,
    RuleDisagreement,
    Span,
    Spread,
    Undecided,
    UnderTest,
)
from repro.coverage import DECIDING_REQUESTS
from repro.report import phrases
from repro.report.phrases import PHRASES
from repro.report.template import phrase
from repro.walkthrough.session import Setup


def test_the_setup_phrase_renders_the_pool_or_the_implementation():
    assert phrases.setup(Setup("cpu", "cpu", pool_bytes=1_153_863_360)) == (
        "profile cpu, device cpu, pool 1,153,863,360 bytes"
    )
    gather = phrases.setup(Setup("gpu", "cuda", implementation="pkg.mod:fn"))
    assert gather.startswith("profile gpu on cuda;") and gather.endswith(": pkg.mod:fn") and "\n" not in gather


def _behaviour(**values) -> Behaviour:
    ran = tuple(("default", m, n) for m in ("in-range", "poison") for n in (1, 2, 4))
    fields = dict(variant="v", counts=(1, 2, 4), modes=("in-range", "poison"), wrong_from=None, fault_from=None)
    fields |= dict(fault_modes=(), faults_observed=False, bug_signature=False, mismatches=(), ran=ran)
    return Behaviour(**(fields | values))


def test_the_small_phrases_render_the_numbers_they_are_given():
    assert phrase(PHRASES, "requests", 1) == "1 request" and phrase(PHRASES, "requests", 7) == "7 requests"
    assert phrase(PHRASES, "listed", (3,)) == "3" and phrase(PHRASES, "listed", (1, 2, 32768)) == "1, 2 and 32,768"
    assert phrase(PHRASES, "listed", ("in-range", "poison")) == "in-range and poison"
    assert phrases.failed_check("split_ratio", "4x") == "split_ratio: 4x"


def test_where_renders_a_spread_from_its_counts_geometries_and_modes():
    assert phrase(PHRASES, "where", Spread(True, None, (), ())) == "in every case"
    assert phrase(PHRASES, "where", Spread(False, 5, (), ("poison",))) == "from 5 requests on poison ids"
    spans = (Span("default", (3, 9), True), Span("wide", (1, 2), False))
    assert phrase(PHRASES, "where", Spread(False, None, spans, ("a", "b"))) == (
        "from 3 requests; at 1 and 2 requests in the wide cases in a and b mode"
    )


def test_the_behaviour_phrase_renders_each_part_it_is_given():
    b = _behaviour(wrong_from=2, wrong=(("default", "in-range", 2), ("default", "in-range", 4)), fault_from=2)
    b = replace(b, fault_modes=("poison",), faulted=(("default", "poison", 2), ("default", "poison", 4)))
    assert (
        phrases.behaviour(b)
        == "is wrong from 2 requests in in-range mode and reads outside every allocation on poison ids"
    )
    assert phrases.behaviour(b, short=True, bare=True).startswith("wrong from 2 requests in in-range mode and ")
    silent = _behaviour(no_result_from=4, no_result_status="timeout", no_result_error="x" * 200, every_case_ok=False)
    assert phrases.behaviour(silent) == "gives no result from 4 requests (timeout: " + "x" * 151 + ")"
    changed = _behaviour(changed_inputs=("k_cache", "slots"), repointed=True, every_case_ok=False)
    assert phrases.behaviour(changed) == (
        "changes its input(s) k_cache, slots (a gather writes only out) and repoints out away from the caller's buffer"
    )
    assert phrases.behaviour(_behaviour()) == "matches the reference in all 6 cases"
    assert phrases.behaviour(_behaviour(), short=True) == "matches the reference"
    assert phrases.behaviour(_behaviour(every_case_ok=False)) == "fails a check of the sweep"


def test_the_coverage_phrase_renders_every_value_it_is_given():
    plain = Coverage(cases=1, counts=(1,), modes=("poison",), geometries=("default",))
    assert phrases.coverage(plain) == "1 case: 1 request; poison ids"
    wide = Coverage(12, (1, 2), ("in-range",), ("default",), (3,), (4, 25), (0, 5), (0, 40), (0, 32768), 2)
    assert phrases.coverage(wide) == (
        "12 cases: 1 and 2 requests; in-range ids; backing tables of 4 and 25 columns behind views of 3; offsets 0 "
        "and 5; gathering whole sequences and the last 40 tokens; block ids from 0 and from 32,768"
    )
    assert phrases.undecided(plain) == (
        f"no case where vllm-project/vllm#55109 can show ran (it needs at least {DECIDING_REQUESTS} requests on a "
        "narrowed table); the sweep ran 1 case: 1 request; poison ids"
    )
    assert phrases.undecided_run(Undecided("02-nb", plain)).startswith("02-nb: no case where vllm-project/vllm#55109")


def test_a_control_and_the_implementation_under_test_are_named_with_what_they_did():
    wrong = _behaviour(wrong_from=1, wrong=(("default", "in-range", 1),), every_case_ok=False)
    assert phrases.control("the buggy gather", Control("buggy", wrong, bug=True)) == (
        "the buggy gather is wrong at 1 request in in-range mode: not the bug's signature"
    )
    assert phrases.control("the fixed gather", Control("fixed", wrong, bug=False)).endswith("in-range mode")
    assert (
        phrases.under_test(UnderTest("", "m:f", _behaviour(), own=False)) == "fix verified: `m:f` matches the reference"
    )
    elsewhere = UnderTest("vllm's f", "m:f", _behaviour(), own=False, elsewhere=("a: b", "c: d"))
    assert (
        phrases.under_test(elsewhere) == "vllm's f matches the reference in the sweep but fails 2 other check(s): a: b"
    )
    own = UnderTest("", "repro.x:f", wrong, own=True)
    assert phrases.under_test(own).startswith("the implementation under test `repro.x:f` is wrong at 1 request")


def test_a_rule_disagreement_and_a_recorded_failure_name_their_values():
    d = RuleDisagreement("02-nb", "gather matches", "under-test", "poison", "4", "True", False, "3 tokens differ")
    assert phrases.rule_disagreement(d) == (
        "02-nb: gather matches [under-test, poison, n=4]: ok is True but the checks' rule gives False for what it "
        "observed (3 tokens differ)"
    )
    assert phrases.recorded_failure(RecordedFailure(2, 1, "x" * 300)) == (
        "manifest.json records the run as failed (2 failed check(s), 1 notebook(s) broke; first: " + "x" * 200 + ")"
    )
    assert phrases.recorded_failure(RecordedFailure(0, 0, "")).endswith("(0 failed check(s), 0 notebook(s) broke)")
