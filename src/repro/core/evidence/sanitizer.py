"""Run one gather case under NVIDIA ``compute-sanitizer --tool memcheck`` and read its log.

What memcheck can and cannot see (why the notebooks need more than this):

* memcheck checks every access against the driver's *allocations*, not against tensor views.
  The wrong-pitch read of the narrowed block table ``backing[:n, :w]`` lands inside the wide
  backing table, a live allocation, so memcheck is blind to it. What it reports is the *derived*
  K-cache address: a sentinel id read by mistake (``poison``, ``-1e6``) puts ``k_cache + id *
  block_stride`` gigabytes before the cache, outside every allocation. With ``in-range`` decoy ids
  the misread gathers real but wrong blocks and memcheck reports nothing (0 errors); the
  bitwise comparison is what catches that, and the result keeps the case's mismatch count.
* torch's caching allocator carves tensors out of large cached segments; memcheck only knows the
  segments, so an access past a tensor that stays inside its segment would pass. The child runs
  with ``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` so each tensor is its own allocation.

Each case runs in its own process (``repro.core.evidence.isolate``), so a fault or a hang becomes a result row.
The log is parsed rather than the exit code (no ``--error-exitcode``): the count, the first access
and the allocation it missed are what a reader needs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from repro.core.evidence import environment
from repro.core.evidence.isolate import run_case_isolated
from repro.core.evidence.scenarios import ScenarioSpec
from repro.registry import implementations

#: Errors printed in full; the rest are only counted (``errors_not_printed``). A faulting gather
#: repeats one access thousands of times, so a few are enough and keep the log small.
DEFAULT_PRINT_LIMIT = 8
#: Seconds for one case under memcheck (process start, torch import, Triton compile, the
#: instrumented kernel); a hang is killed and reported as ``timeout``.
DEFAULT_TIMEOUT_S = 300.0
#: Concurrent sanitizer processes in ``run_many``; each is small, and several share one GPU for
#: correctness checks (a 50-case sweep stays within a couple of minutes on a 16-core GPU host).
DEFAULT_MAX_WORKERS = 8
#: Child environment under the sanitizer. No caching allocator: memcheck only knows allocations,
#: and a cached segment would hide accesses past a tensor but inside the segment. Line info kept
#: so reports name ``gather.py:49`` rather than a bare program counter.
SANITIZER_ENV = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "TRITON_DISABLE_LINE_INFO": "0"}
#: Characters of child stderr kept in a result.
STDERR_TAIL_CHARS = 2000


# ----------------------------------------------------------------------------------------------
# Parsing
# ----------------------------------------------------------------------------------------------


@dataclass
class InvalidAccess:
    """One reported memory error; fields the log does not give are None."""

    headline: str  # the error's first line, e.g. "Invalid __global__ read of size 1 bytes"
    kind: str | None = None  # "read" | "write" | "atomic" ...; None for hardware exceptions
    memory_space: str | None = None  # "__global__" | "__shared__" | "__local__" ...
    size_bytes: int | None = None
    kernel: str | None = None
    source_file: str | None = None
    line: int | None = None
    pc_offset: int | None = None  # "+0x480" in new logs, "at 0xda0" in old ones
    thread: tuple[int, ...] | None = None
    block: tuple[int, ...] | None = None
    address: int | None = None
    problem: str | None = None  # "out of bounds" | "misaligned" | a hardware exception's headline
    relation: str | None = None  # "before" | "after" | "inside" the nearest allocation
    distance_bytes: int | None = None  # None for "inside"
    allocation_address: int | None = None
    allocation_size_bytes: int | None = None

    def summary(self) -> str:
        return describe_access(self)


@dataclass
class MemcheckReport:
    error_count: int | None = None  # None: no ERROR SUMMARY line (the tool crashed or was killed)
    errors_not_printed: int | None = None
    accesses: list[InvalidAccess] = field(default_factory=list)
    api_errors: list[str] = field(default_factory=list)  # "Program hit cudaError... on CUDA API call to ..."
    target_failed: bool = False  # "Target application returned an error"
    tool_errors: list[str] = field(default_factory=list)  # the tool's own "Error: ..." lines

    @property
    def first_access(self) -> InvalidAccess | None:
        return self.accesses[0] if self.accesses else None

    def first_access_summary(self) -> str | None:
        return describe_access(self.accesses[0]) if self.accesses else None


_PREFIX = re.compile(r"^={3,} ?")
_INVALID = re.compile(r"^Invalid\s+(?P<space>\S+)\s+(?P<kind>\w+)\s+of\s+size\s+(?P<size>[\d,]+)(?:\s+bytes?)?\b")
# Device exceptions without an "Invalid ... of size" line (memcheck docs, "Hardware exception").
_HW_EXCEPTION = re.compile(
    r"^(?:(?:Warp|Lane|Device)\s+)?(?:Misaligned|Out-of-range|Illegal|Invalid|Hardware)\b"
    r"|^(?:Warp|Lane)\b.*\bStack Overflow\b|^Malloc/Free [Ee]rror"
)
_AT_OLD = re.compile(r"^at\s+0x(?P<pc>[0-9a-fA-F]+)\s+in\s+(?P<rest>.+?)\s*$")
_OLD_LOCATION = re.compile(r"^(?P<file>\S+?):(?P<line>\d+):(?P<kernel>.+)$")
_AT_NEW = re.compile(r"^at\s+(?P<kernel>.+?)\+0x(?P<pc>[0-9a-fA-F]+)(?:\s+in\s+(?P<file>.+?):(?P<line>\d+))?\s*$")
_AT_BARE = re.compile(r"^at\s+(?P<kernel>.+?)(?:\s+in\s+(?P<file>.+?):(?P<line>\d+))?\s*$")
_THREAD = re.compile(r"^by\s+thread\s*\((?P<thread>[\d,\s]*)\)(?:\s*in\s+block\s*\((?P<block>[\d,\s]*)\))?")
_ADDRESS = re.compile(r"^(?:Access\s+to|Address)\s+0x(?P<addr>[0-9a-fA-F]+)\s+is\s+(?P<problem>.+?)\.?\s*$")
_NEAREST = re.compile(
    r"^and\s+is\s+(?:(?P<dist>[\d,]+)\s+bytes?\s+)?(?P<rel>before|after|inside)\b"
    r".*?nearest\s+allocation(?:\s+at\s+0x(?P<alloc>[0-9a-fA-F]+))?"
    r"(?:\s+of\s+size\s+(?P<asize>[\d,]+)\s+bytes?)?"
)
_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(?P<n>[\d,]+)\s+errors?\b(?P<rest>.*)$")
_FRAME = re.compile(r"^(?:Host|Device)\s+Frame:|^Saved host backtrace")


def _int(text: str | None) -> int | None:
    return int(text.replace(",", "")) if text else None


def _dims(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    parts = [p for p in text.replace(" ", "").split(",") if p]
    return tuple(int(p) for p in parts) if parts else None


def _tool_lines(text: str) -> list[str]:
    """Lines of the tool's own output with the ``=========`` prefix removed (indentation stripped).

    When the text mixes tool and application output (no ``--log-file``), only prefixed lines count.
    """
    raw = text.splitlines()
    prefixed = any(_PREFIX.match(ln) for ln in raw)
    out = []
    for ln in raw:
        m = _PREFIX.match(ln)
        if m:
            out.append(ln[m.end() :].strip())
        elif not prefixed:
            out.append(ln.strip())
    return out


def parse_memcheck_log(text: str) -> MemcheckReport:
    """Parse a memcheck log (new ``compute-sanitizer`` or old ``cuda-memcheck`` wording). Never raises."""
    report = MemcheckReport()
    current: InvalidAccess | None = None
    for line in _tool_lines(text or ""):
        if not line:
            current = None
            continue
        m = _SUMMARY.search(line)
        if m:
            current = None
            n = _int(m.group("n"))
            if "not printed" in m.group("rest"):
                if report.errors_not_printed is None:
                    report.errors_not_printed = n
            elif report.error_count is None:  # the first summary line is the total
                report.error_count = n
            continue
        if line.startswith("Program hit"):
            report.api_errors.append(line)
            current = None
            continue
        if line.startswith("Target application returned an error"):
            report.target_failed = True
            current = None
            continue
        if line.startswith("Error:") or line.startswith("Internal Sanitizer Error"):
            report.tool_errors.append(line)
            current = None
            continue
        m = _INVALID.match(line)
        if m:
            current = InvalidAccess(
                headline=line, kind=m.group("kind"), memory_space=m.group("space"), size_bytes=_int(m.group("size"))
            )
            report.accesses.append(current)
            continue
        if _HW_EXCEPTION.match(line):
            current = InvalidAccess(headline=line, problem=line)
            report.accesses.append(current)
            continue
        if current is None or _FRAME.match(line):
            continue
        _parse_detail(current, line)
    return report


def _parse_detail(acc: InvalidAccess, line: str) -> None:
    if line.startswith("at ") and acc.kernel is None and acc.source_file is None:
        m = _AT_OLD.match(line)
        if m:  # cuda-memcheck / early compute-sanitizer: "at 0xda0 in /path/file.py:175:kernel"
            acc.pc_offset = int(m.group("pc"), 16)
            loc = _OLD_LOCATION.match(m.group("rest"))
            if loc:
                acc.source_file, acc.line, acc.kernel = loc.group("file"), int(loc.group("line")), loc.group("kernel")
            else:
                acc.kernel = m.group("rest")
            return
        m = _AT_NEW.match(line) or _AT_BARE.match(line)
        if m:  # "at kernel+0x480 in gather.py:49"
            acc.kernel = m.group("kernel").strip()
            acc.pc_offset = int(m.group("pc"), 16) if "pc" in m.groupdict() and m.group("pc") else None
            if m.group("file"):
                acc.source_file, acc.line = m.group("file"), int(m.group("line"))
        return
    m = _THREAD.match(line)
    if m:
        acc.thread, acc.block = _dims(m.group("thread")), _dims(m.group("block"))
        return
    m = _ADDRESS.match(line)
    if m:
        acc.address = int(m.group("addr"), 16)
        acc.problem = m.group("problem")
        return
    m = _NEAREST.match(line)
    if m:
        acc.relation = m.group("rel")
        acc.distance_bytes = _int(m.group("dist")) if acc.relation != "inside" else None
        acc.allocation_address = int(m.group("alloc"), 16) if m.group("alloc") else None
        acc.allocation_size_bytes = _int(m.group("asize"))


def _nbytes(n: int) -> str:
    return "1 byte" if n == 1 else f"{n:,} bytes"


def describe_access(acc: InvalidAccess | None, max_kernel_chars: int = 80) -> str:
    """One line, e.g. ``read of 1 byte at gather.py:49 in k, 37,439,963,098 bytes before a 449,280-byte allocation``."""
    if acc is None:
        return ""
    if acc.kind:
        what = f"{acc.kind} of {_nbytes(acc.size_bytes)}" if acc.size_bytes is not None else acc.kind
        if acc.memory_space and acc.memory_space != "__global__":
            what = f"{acc.memory_space} {what}"
    else:
        what = acc.headline
    text = what
    if acc.source_file:
        text += f" at {os.path.basename(acc.source_file)}:{acc.line}"
    if acc.kernel:
        kernel = acc.kernel if len(acc.kernel) <= max_kernel_chars else acc.kernel[: max_kernel_chars - 3] + "..."
        text += f" in {kernel}"
    if acc.problem and acc.problem != acc.headline and (acc.problem != "out of bounds" or acc.relation is None):
        text += f", {acc.problem}"
    alloc = (
        f"a {acc.allocation_size_bytes:,}-byte allocation"
        if acc.allocation_size_bytes is not None
        else "the nearest allocation"
    )
    if acc.relation == "inside":
        text += f", inside {alloc}"
    elif acc.relation and acc.distance_bytes is not None:
        text += f", {_nbytes(acc.distance_bytes)} {acc.relation} {alloc}"
    elif acc.relation:
        text += f", {acc.relation} {alloc}"
    return text


# ----------------------------------------------------------------------------------------------
# Running
# ----------------------------------------------------------------------------------------------


def sanitizer_command(sanitizer_path: str, log_file: str | Path, print_limit: int = DEFAULT_PRINT_LIMIT) -> list[str]:
    """``compute-sanitizer --tool memcheck`` argv prefix writing its report to ``log_file``.

    No ``--error-exitcode``: the log is parsed, and the case's own exit status is kept apart.
    The log path must not contain ``%`` (the tool expands ``%p``, ``%h`` ... in it).
    """
    if "%" in str(log_file):
        raise ValueError(f"log file path must not contain '%' (compute-sanitizer expands it): {log_file}")
    return [
        str(sanitizer_path),
        "--tool",
        "memcheck",
        "--print-limit",
        str(int(print_limit)),
        "--log-file",
        str(log_file),
    ]


def variant_label(implementation: str) -> str:
    """``buggy`` for the library's own gather_buggy, else the function name."""
    for entry in implementations():
        if entry.target == implementation:
            return entry.label
    return implementation.rsplit(":", 1)[-1] or implementation


def log_name(spec: ScenarioSpec, implementation: str) -> str:
    """``<variant>-<mode>-<n>req-<hash>.log``; the hash of the whole case keeps concurrent logs apart."""
    digest = hashlib.sha1(
        json.dumps([spec.to_dict(), implementation], sort_keys=True, default=str).encode()
    ).hexdigest()[:8]
    stem = f"{variant_label(implementation)[:160]}-{spec.mode}-{spec.num_reqs}req-{digest}"  # within NAME_MAX
    return re.sub(r"[^A-Za-z0-9._-]+", "_", stem) + ".log"


@dataclass
class SanitizerResult:
    implementation: str
    variant: str
    mode: str
    num_reqs: int
    status: str  # clean | errors | timeout | sanitizer-failed | unavailable
    error_count: int | None = None
    errors_not_printed: int | None = None
    first_access: str | None = None  # describe_access() of the first reported error
    api_errors: list[str] = field(default_factory=list)
    target_failed: bool = False
    case_status: str | None = None  # the case's own: ok | error | crashed | timeout (None: not run)
    mismatched_tokens: int | None = None
    stray_writes: int | None = None
    case_error: str = ""
    returncode: int | None = None
    error: str = ""  # why the sanitizer verdict is missing (unavailable / failed / timeout)
    stderr_tail: str = ""
    log_path: str | None = None
    seconds: float = 0.0
    spec: dict = field(default_factory=dict)

    @property
    def flagged(self) -> bool:
        return bool(self.error_count)

    def to_dict(self) -> dict:
        return asdict(self)


def run_under_sanitizer(
    spec: ScenarioSpec,
    implementation: str,
    log_dir: str | Path,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    print_limit: int = DEFAULT_PRINT_LIMIT,
    env_extra: Mapping[str, str] | None = None,
    sanitizer_path: str | None = None,
    log_file_name: str | None = None,
) -> SanitizerResult:
    """One case in its own process under memcheck. Never raises for a case or tool failure.

    ``sanitizer_path`` None: :func:`repro.core.evidence.environment.find_compute_sanitizer`. Run a ``cuda`` spec:
    on ``cpu`` there is no kernel for memcheck to check and the verdict is trivially clean.
    """
    t0 = time.perf_counter()
    result = SanitizerResult(
        implementation=implementation,
        variant=variant_label(implementation),
        mode=spec.mode,
        num_reqs=spec.num_reqs,
        status="unavailable",
        spec=spec.to_dict(),
    )
    tool = sanitizer_path if sanitizer_path is not None else environment.find_compute_sanitizer()
    if not tool or not Path(tool).is_file():
        result.error = (
            f"compute-sanitizer not found (PATH, {', '.join(environment.SANITIZER_FALLBACKS)})"
            if not tool
            else f"compute-sanitizer not found at {tool}"
        )
        return result
    try:
        log_dir = Path(log_dir).resolve()
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / (log_file_name or log_name(spec, implementation))
        log_path.unlink(missing_ok=True)  # never parse a stale log from an earlier run
        result.log_path = str(log_path)
        env = {**SANITIZER_ENV, **(env_extra or {})}
        case, child = run_case_isolated(
            spec, implementation, timeout_s, wrapper=sanitizer_command(tool, log_path, print_limit), env_extra=env
        )
        result.seconds = round(child.seconds, 3)
        result.case_status, result.case_error, result.returncode = case.status, case.error, child.returncode
        result.mismatched_tokens, result.stray_writes = case.mismatched_tokens, case.stray_writes
        result.stderr_tail = child.stderr[-STDERR_TAIL_CHARS:]
        text = log_path.read_text(errors="replace") if log_path.is_file() else ""
        report = parse_memcheck_log(text)
        result.error_count, result.errors_not_printed = report.error_count, report.errors_not_printed
        result.first_access = report.first_access_summary()
        result.api_errors, result.target_failed = report.api_errors, report.target_failed
        if child.timed_out:
            result.status = "timeout"
            result.error = f"no result within {timeout_s:g} s (process group killed)"
        elif report.error_count is None:
            result.status = "sanitizer-failed"
            why = "; ".join(report.tool_errors) or ("no log written" if not text else "no ERROR SUMMARY in log")
            result.error = f"{why}; exit code {child.returncode}"
        elif report.error_count == 0 and _tool_did_not_check(report):
            # "0 errors" from a tool that reported its own failure is no evidence of safety.
            result.status = "sanitizer-failed"
            result.error = "; ".join(report.tool_errors)
        else:
            result.status = "errors" if report.error_count else "clean"
    except Exception as exc:  # a broken tool path, an unwritable log folder: a row, not a crash
        result.status = "sanitizer-failed"
        result.error = f"{type(exc).__name__}: {exc}"[:500]
        result.seconds = round(time.perf_counter() - t0, 3)
    return result


def _tool_did_not_check(report: MemcheckReport) -> bool:
    """Tool errors other than the target's own non-zero exit."""
    return any("terminate successfully" not in e and "returned an error" not in e for e in report.tool_errors)


#: ``(spec, implementation)`` or a mapping of :func:`run_under_sanitizer` keyword arguments.
Job = tuple[ScenarioSpec, str] | Mapping[str, Any]


def run_many(
    jobs: Iterable[Job],
    max_workers: int = DEFAULT_MAX_WORKERS,
    on_result: Callable[[int, SanitizerResult], None] | None = None,
    **common: Any,
) -> list[SanitizerResult]:
    """Run cases concurrently (threads, each driving its own sanitizer process); results in input order.

    A job is ``(spec, implementation)`` or a mapping of :func:`run_under_sanitizer` keyword
    arguments; ``common`` (``log_dir``, ``timeout_s``, ``print_limit``, ...) fills in the rest.
    ``on_result(index, result)`` is called as each case finishes (from a worker thread).
    """
    kwargs_list: list[dict] = []
    for job in jobs:
        if isinstance(job, Mapping):
            kwargs = {**common, **job}
        else:
            spec, implementation = job
            kwargs = {**common, "spec": spec, "implementation": implementation}
        kwargs_list.append(kwargs)
    # Identical cases would share a log file; number the repeats.
    seen: dict[str, int] = {}
    for kwargs in kwargs_list:
        name = kwargs.get("log_file_name") or log_name(kwargs["spec"], kwargs["implementation"])
        if name in seen:
            seen[name] += 1
            name = f"{name[:-4] if name.endswith('.log') else name}-{seen[name]}.log"
        else:
            seen[name] = 0
        kwargs["log_file_name"] = name

    def one(index: int) -> SanitizerResult:
        res = run_under_sanitizer(**kwargs_list[index])
        if on_result is not None:
            on_result(index, res)
        return res

    if not kwargs_list:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(int(max_workers), len(kwargs_list)))) as pool:
        futures = [pool.submit(one, i) for i in range(len(kwargs_list))]
        return [f.result() for f in futures]
