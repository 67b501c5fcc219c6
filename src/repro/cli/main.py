"""Command line: ``python -m repro run ...`` and ``python -m repro report RUN_DIR [--against RUN_B]``."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m repro", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute every notebook into a run folder and write the report")
    run.add_argument("--profile", default="auto", help="auto (default), cpu or gpu")
    run.add_argument("--out", default=None, help="run folder (default runs/<timestamp>)")
    run.add_argument(
        "-p",
        dest="params",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="notebook parameter, VALUE read as YAML (repeatable)",
    )
    run.add_argument("--resume", action="store_true", help="finish an interrupted run in --out")
    run.add_argument(
        "--notebooks", nargs="+", default=None, metavar="PREFIX", help="run only these notebooks (e.g. 01 02)"
    )
    report = sub.add_parser("report", help="rebuild report.md and report.html from a run folder")
    report.add_argument("run_dir")
    report.add_argument(
        "--against",
        default=None,
        metavar="RUN_B",
        help="compare with another run, check by check (e.g. buggy vs fixed)",
    )
    report.add_argument(
        "--merge",
        nargs="+",
        default=None,
        metavar="RUN",
        help="merge the release-matrix tables of these run folders (one CI job per release and runner) into RUN_DIR",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        from repro.cli.runner import run

        return run(args.profile, args.out, args.params, resume=args.resume, selection=args.notebooks)
    if args.merge:
        from repro.report.releases import merge_command

        return merge_command(args.run_dir, args.merge)
    return report(args.run_dir, args.against)


def report(run_dir: str, against: str | None) -> int:
    """Rebuild a run folder's report, or compare it with another run; a damaged folder is exit 2."""
    from repro.analysis.rundata import RunFolderError, load_run
    from repro.report.build import build_report, write_comparison

    try:
        run = load_run(run_dir)
        other = load_run(against) if against else None
        if other is not None:
            print(f"wrote {write_comparison(run, other)}")
            return 0
    except RunFolderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    md, html = build_report(run)
    print(f"wrote {md} and {html}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
