"""Command line: ``python -m repro run ...`` and ``python -m repro report RUN_DIR [--against RUN_B]``."""

from __future__ import annotations

import argparse
import contextlib
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from repro.cli import interrupts
from repro.cli.runfolder import RunFolderError, RunLock, check_writable, holder_if_locked
from repro.cli.runner import declared_parameters, notebooks, run
from repro.parameters import RESERVED, SCHEMA

if TYPE_CHECKING:
    from repro.report.verdict import RunVerdict

EXIT_CODES = """exit codes:
  0    the run finished and every check passed
  1    a check failed, a notebook broke, the run did not finish (report) or stopped on a file-system
       fault (run; --resume goes on), or the report could not be written: each is named
  2    bad input, a damaged run folder, or a run folder in use, not writable or not resumable: one
       line naming what and what is accepted; nothing is written
  130  interrupted (Ctrl-C, SIGTERM, SIGHUP); finished results are kept and --resume goes on"""

RUN_FOLDER = """run folder:
  One writer at a time: run, resume and report lock the folder (.repro.lock) for their whole life,
  and a second one is refused (exit 2). --resume continues a run that did not finish (interrupted,
  killed, or stopped by a file-system fault) with the same profile, -p values and code (commit,
  sources, implementation module): it keeps the notebooks that finished and re-runs the rest. A
  finished run is refused (exit 2): its verdict stands; run again into a new --out. manifest.json
  holds the command that reproduces the run (paste it at the checkout root into a fresh --out)."""


def parameter_help() -> str:
    """Every notebook parameter: which notebooks take it, its default and what it accepts."""
    try:
        declared = declared_parameters(notebooks())
    except Exception as exc:  # help must not fail because the checkout is odd
        return f"parameters: (cannot read the notebooks: {exc})"
    lines = ["parameters (-p NAME=VALUE; integers in decimal, strings as typed, lists as [a, b] or a,b):"]
    for name, where in declared.items():
        if name in RESERVED:
            continue
        spec = SCHEMA.get(name)
        default = next(iter(where.values()))
        lines.append(f"  {name} (notebook {', '.join(n[:2] for n in where)}; default {default})")
        if spec is not None:
            lines.append(textwrap.fill(spec.accepted, 100, initial_indent=" " * 6, subsequent_indent=" " * 6))
    return "\n".join(lines)


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error (exit code 2) like every other bad input."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message} (--help lists what is accepted)\n")


def build_parser(with_parameters: bool = False) -> argparse.ArgumentParser:
    parser = Parser(prog="python -m repro", description=__doc__, allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    kw = {"allow_abbrev": False}
    epilog = "\n\n".join(([parameter_help()] if with_parameters else []) + [EXIT_CODES, RUN_FOLDER])
    run = sub.add_parser(
        "run",
        help="execute every notebook into a run folder and write the report",
        description="Execute every notebook through papermill into a run folder, then write report.md and report.html.",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kw,
    )
    run.add_argument(
        "--profile",
        default="auto",
        metavar="{auto,cpu,gpu}",
        help="auto (default: gpu when CUDA is available), cpu or gpu",
    )
    run.add_argument("--out", default=None, help="run folder (default runs/<timestamp>; runs/latest follows it)")
    run.add_argument(
        "-p",
        dest="params",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="notebook parameter (repeatable); see the list below",
    )
    run.add_argument("--resume", action="store_true", help="finish an interrupted or killed run in --out")
    run.add_argument(
        "--notebooks", nargs="+", default=None, metavar="PREFIX", help="run only these notebooks (e.g. 01 02)"
    )
    report = sub.add_parser(
        "report",
        help="rebuild report.md and report.html from a run folder",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kw,
    )
    report.add_argument("run_dir")
    report.add_argument(
        "--against",
        default=None,
        metavar="RUN_B",
        help="compare with another run, check by check (e.g. buggy vs fixed)",
    )
    report.add_argument(
        "--repo-url",
        default=None,
        metavar="URL",
        help="the GitHub repository that holds the run folder: pr-comment.md links its files there "
        "(default: the checkout's origin when it is on GitHub; '' names them as plain text)",
    )
    report.add_argument(
        "--merge",
        nargs="+",
        default=None,
        metavar="RUN",
        help="merge the release-matrix tables of these run folders (one CI job per release and runner) into RUN_DIR "
        "(a new folder or an earlier merge's; each input is checked first)",
    )
    return parser


def is_folder(path: Path) -> bool:
    """A folder that exists (a name too long to look up is none)."""
    try:
        return path.is_dir()
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    # A kill from a timeout or a closed terminal ends like Ctrl-C at every stage: results kept, exit 130.
    interrupts.install()
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build_parser(with_parameters="-h" in argv or "--help" in argv).parse_args(argv)
    except KeyboardInterrupt:
        return 130
    try:
        if args.command == "run":
            return run(args.profile, args.out, args.params, resume=args.resume, selection=args.notebooks)
        if args.merge:
            return merge(args.run_dir, args.merge)
        return report(args.run_dir, args.against, args.repo_url)
    except KeyboardInterrupt:  # a stage with no message of its own (each that writes has one)
        print("interrupted", file=sys.stderr)
        return 130
    except SystemExit as exc:  # something imported or called during the run tried to end it
        print(
            f"error: the run was ended from inside by SystemExit({exc.code!r}); nothing counts as passed",
            file=sys.stderr,
        )
        return 1


def merge(out_dir: str, run_dirs: list[str]) -> int:
    """``report OUT --merge RUN...``: every input is read and checked first (each under a shared lock, as
    ``--against`` reads), then ``OUT`` is written under its own lock like any writer. A damaged input, an
    input no run folder, no matrix table in any input, or an ``OUT`` that is a run folder: one line,
    exit 2, nothing written."""
    from repro.core.analysis.rundata import MANIFEST, load_run  # lazy: pandas, only to read a run
    from repro.core.analysis.rundata import RunFolderError as DamagedRun  # lazy: pandas, only to read a run
    from repro.report.releases import MATRIX_TABLE, merge_command  # lazy: matplotlib, only to write a report

    out = Path(out_dir)
    try:
        if (out / MANIFEST).exists():
            raise RunFolderError(
                f"report: {out} holds a run (its {MANIFEST}); accepted: a new folder or an earlier merge's folder"
            )
        with contextlib.ExitStack() as readers:
            runs = []
            for d in run_dirs:
                if not is_folder(Path(d)):
                    raise RunFolderError(f"--merge: {d}: no such run folder")
                readers.enter_context(RunLock(Path(d), "report --merge", exclusive=False).acquire("--merge"))
                runs.append(load_run(d))
            if not any(run.table(MATRIX_TABLE) is not None for run in runs):
                raise RunFolderError(
                    f"--merge: none of {', '.join(run_dirs)} holds results/{MATRIX_TABLE}.csv; accepted: run "
                    "folders of notebook 04"
                )
            out.mkdir(parents=True, exist_ok=True)
            with RunLock(out, "report --merge").acquire("report"):
                return merge_command(out, runs)
    except (RunFolderError, DamagedRun, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def report(run_dir: str, against: str | None, repo_url: str | None = None) -> int:
    """Rebuild a run folder's report, or compare it with another run. The folder is locked for writing
    (refused while a run or another report writes it), the other run shared; a damaged folder is one
    line naming the file, exit code 2, with nothing written. ``repo_url``: where pr-comment.md links the
    folder's files (None: the checkout's GitHub origin, if any; "": nowhere)."""
    from repro.core.analysis.rundata import RunFolderError as DamagedRun  # lazy: pandas, only to read a run
    from repro.core.analysis.rundata import load_run  # lazy: pandas, only to read a run
    from repro.report.build import write_comparison, write_report  # lazy: matplotlib, only to write a report
    from repro.report.links import github_url, origin_url  # lazy: with the report code, only for report
    from repro.report.verdict import run_verdict  # lazy: pandas, only to read a run

    path = Path(run_dir)
    if not is_folder(path):
        print(f"error: report: {path}: no such run folder", file=sys.stderr)
        return 2
    if repo_url and github_url(repo_url) is None:
        print(
            f"error: --repo-url: {repo_url!r} is not a GitHub repository URL; accepted: '' (no links) or a URL "
            "such as https://github.com/OWNER/REPO",
            file=sys.stderr,
        )
        return 2
    repo_url = origin_url(path) if repo_url is None else github_url(repo_url)
    try:
        busy = holder_if_locked(path)
        if busy is not None:  # a run is writing it: its tables may end mid-row right now
            raise RunFolderError(f"report: {path} is in use by another process{busy}; accepted: wait for it to end")
        load_run(path)  # not a run folder, or a damaged one: refused before the lock file is created
        check_writable(path, "report", ("plots",))
        with RunLock(path, "report").acquire("report"):
            run = load_run(path)
            if against is not None:
                if not is_folder(Path(against)):
                    print(f"error: --against: {against}: no such run folder", file=sys.stderr)
                    return 2
                if Path(against).resolve() == path.resolve():  # the run itself, already locked and read
                    print(f"wrote {write_comparison(run, run)}")
                    return verdict_code(run_verdict(run))
                with RunLock(Path(against), "report --against", exclusive=False).acquire("--against"):
                    print(f"wrote {write_comparison(run, load_run(against))}")
                return verdict_code(run_verdict(run))
            try:
                md, comment, html = write_report(run, repo_url)
            except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
                if isinstance(exc, DamagedRun):
                    raise
                raise DamagedRun(
                    f"{path}: its tables cannot be rendered ({type(exc).__name__}: {exc}); nothing was written"
                ) from None
    except (RunFolderError, DamagedRun) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the folder refused a write midway (disk full, ...)
        print(f"error: report: {_cannot_write(exc, path)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    print(f"wrote {md}, {comment} and {html}")
    verdict = run_verdict(run)
    print(verdict_line(verdict, run.status))
    return verdict_code(verdict)


def _cannot_write(exc: OSError, folder: Path) -> str:
    return f"cannot write {exc.filename or folder} ({exc.strerror or exc})"


def verdict_code(verdict: RunVerdict) -> int:
    """The exit code of a run's verdict: 0 only for a finished run whose every check passed."""
    return 0 if verdict.complete and verdict.failed == 0 else 1


def verdict_line(verdict: RunVerdict, status: str) -> str:
    """The last line ``report`` prints: the verdict its exit code stands for."""
    if not verdict.complete:
        return f"INCOMPLETE: the run did not finish (status {status!r})" + "".join(
            f": {line}" for line in verdict.not_finished[:1]
        )
    if verdict.failed:
        return f"FAILED: {verdict.failed} of {verdict.checks} check(s) failed: {verdict.title}"
    if not verdict.checks:
        return f"finished with no checks to pass (its notebooks record, they do not expect): {verdict.title}"
    return f"all {verdict.checks} checks passed: {verdict.title}"


if __name__ == "__main__":
    sys.exit(main())
