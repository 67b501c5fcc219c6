"""``python -m repro run``: every notebook through papermill into one run folder, then the report.

Exit codes: 0 every check passed; 1 a check failed or a notebook broke (each named); 2 bad input,
reported before anything runs; 130 interrupted (the run folder keeps what finished).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import sys
import time
from pathlib import Path

from repro.parameters import RESERVED, ParameterError, validate_all, validate_notebook
from repro.paths import notebooks_dir, repo_root, runs_dir
from repro.profiles import ProfileError, resolve

REPORT_NOTEBOOK = "90-report.ipynb"
#: Per-cell execution limit; the sweeps bound their own cases well below it.
CELL_TIMEOUT_S = 1800


class UsageError(ValueError):
    """Bad input: one line naming the parameter and what is accepted; exit code 2."""


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def notebooks(selection: list[str] | None = None) -> list[Path]:
    """Numbered notebooks in reading order, the report notebook excluded."""
    found = sorted(p for p in notebooks_dir().glob("[0-9][0-9]-*.ipynb") if p.name != REPORT_NOTEBOOK)
    if selection:
        chosen = [p for p in found if any(p.name.startswith(s) for s in selection)]
        if len(chosen) != len(selection) or not chosen:
            names = ", ".join(p.stem for p in found)
            raise UsageError(f"--notebooks: {selection} does not name notebooks; accepted: prefixes of {names}")
        return chosen
    return found


def declared_parameters(paths: list[Path]) -> dict[str, dict[str, object]]:
    """``{name: {notebook: default}}`` from each notebook's ``parameters`` cell."""
    import papermill as pm

    declared: dict[str, dict[str, object]] = {}
    for path in paths:
        for name, info in pm.inspect_notebook(str(path)).items():
            declared.setdefault(name, {})[path.stem] = info["default"]
    return declared


def notebook_values(declared: dict[str, dict[str, object]], stem: str, params: dict) -> dict:
    """Every parameter one notebook will see: its own defaults, overridden by ``-p`` values it declares."""
    import ast

    values = {}
    for name, defaults in declared.items():
        if stem not in defaults or name in RESERVED:
            continue
        try:
            values[name] = ast.literal_eval(str(defaults[stem]))
        except (ValueError, SyntaxError):
            values[name] = defaults[stem]
    values.update({k: v for k, v in params.items() if k in values})
    return values


def implementations_used(values: dict) -> dict:
    """Provenance (package version, module hash) of every implementation a notebook will load."""
    from repro.registry import provenance

    return {name: provenance(values[name]) for name in ("implementation", "reference_gather") if values.get(name)}


def prepare_run_dir(out: str | None, resume: bool) -> Path:
    run_dir = Path(out) if out else runs_dir() / dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    if run_dir.exists() and any(run_dir.iterdir()) and not resume:
        raise UsageError(
            f"--out: {run_dir} already holds a run; accepted: a new or empty folder, or --resume to finish that run"
        )
    if resume and not (run_dir / "manifest.json").exists():
        raise UsageError(f"--resume: {run_dir} holds no manifest.json to resume")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(
            f"--out: cannot write to {run_dir} ({exc.strerror or exc}); accepted: a writable folder"
        ) from None
    return run_dir


class Manifest:
    """``manifest.json``, rewritten after every step so a killed run says how far it got."""

    def __init__(self, path: Path, data: dict):
        self.path, self.data = path, data

    @classmethod
    def load(cls, path: Path) -> Manifest:
        return cls(path, json.loads(path.read_text()))

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, default=str) + "\n")
        tmp.replace(self.path)


def point_latest(run_dir: Path) -> None:
    latest = runs_dir() / "latest"
    latest.parent.mkdir(exist_ok=True)
    target = os.path.relpath(run_dir.resolve(), latest.parent.resolve())
    tmp = latest.with_name("latest.tmp")
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(target)
    tmp.replace(latest)


def execute_notebook(src: Path, dst: Path, parameters: dict, progress: bool) -> dict:
    """One notebook through papermill's API; failures become a status, never an exception."""
    import papermill as pm

    t0 = time.perf_counter()
    status = {"status": "ok", "error": ""}
    try:
        pm.execute_notebook(
            str(src),
            str(dst),
            parameters=parameters,
            kernel_name="python3",
            progress_bar=progress,
            execution_timeout=CELL_TIMEOUT_S,
            request_save_on_cell_execute=True,
            cwd=str(repo_root()),
        )
    except pm.PapermillExecutionError as exc:
        status = {"status": "failed", "error": f"{exc.ename}: {exc.evalue}", "cell": exc.exec_count}
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # dead kernel, cell timeout, ...
        status = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"[:2000]}
    status["seconds"] = round(time.perf_counter() - t0, 1)
    return status


def run(
    profile_name: str,
    out: str | None,
    assignments: list[str],
    resume: bool = False,
    selection: list[str] | None = None,
    report: bool = True,
) -> int:
    try:
        profile = resolve(profile_name)
        paths = notebooks(selection)
        declared = declared_parameters(paths)
        params = validate_all(assignments, {k: list(v) for k, v in declared.items()})
        seen: dict = {}
        for path in paths:
            seen.update(validate_notebook(notebook_values(declared, path.stem, params), profile))
        run_dir = prepare_run_dir(out, resume)
    except (ProfileError, ParameterError, UsageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    if profile == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # inherited by every notebook kernel
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    progress = sys.stderr.isatty() and not os.environ.get("CI")

    manifest_path = run_dir / "manifest.json"
    if resume:
        manifest = Manifest.load(manifest_path)
        if manifest.data.get("profile") != profile or manifest.data.get("parameters") != params:
            print(
                f"error: --resume: {run_dir} was run with profile {manifest.data.get('profile')!r} and "
                f"parameters {manifest.data.get('parameters')}; accepted: the same profile and -p values",
                file=sys.stderr,
            )
            return 2
    else:
        from repro.evidence.environment import describe

        manifest = Manifest(
            manifest_path,
            {
                "status": "running",
                "profile": profile,
                "parameters": params,
                "command": " ".join(
                    ["python -m repro run", f"--profile {profile_name}", *[f"-p {a}" for a in assignments]]
                ),
                "started": now(),
                "finished": None,
                "environment": describe(repo_root()),
                "implementations": implementations_used(seen),
                "notebooks": {},
            },
        )
    manifest.data["status"] = "running"
    manifest.save()
    signal.signal(signal.SIGTERM, _terminate)  # a kill from a timeout ends like Ctrl-C: results kept

    (run_dir / "notebooks").mkdir(exist_ok=True)
    try:
        for path in paths:
            done = manifest.data["notebooks"].get(path.stem, {})
            if resume and done.get("status") == "ok":
                print(f"[{path.stem}] already complete, kept")
                continue
            if resume:
                _discard_partial(run_dir, path.stem)
            nb_params = {"profile": profile, "run_dir": str(run_dir.resolve())}
            nb_params.update({k: v for k, v in params.items() if path.stem in declared.get(k, {})})
            print(f"[{path.stem}] running ({profile})", flush=True)
            manifest.data["notebooks"][path.stem] = {"status": "running", "started": now()}
            manifest.save()
            status = execute_notebook(path, run_dir / "notebooks" / path.name, nb_params, progress)
            manifest.data["notebooks"][path.stem] = status
            manifest.save()
            print(
                f"[{path.stem}] {status['status']} in {status['seconds']} s"
                + (f": {status['error'].splitlines()[0]}" if status["error"] else ""),
                flush=True,
            )
    except KeyboardInterrupt:
        manifest.data.update(status="interrupted", finished=now())
        manifest.save()
        print(f"interrupted: finished results are kept in {run_dir}", file=sys.stderr)
        return 130

    from repro.analysis.rundata import load_run

    failures = load_run(run_dir).failures()
    broken = [
        f"{name}: {st.get('error', '').splitlines()[0] if st.get('error') else st['status']}"
        for name, st in manifest.data["notebooks"].items()
        if st["status"] != "ok"
    ]
    manifest.data.update(
        status="complete" if not (failures or broken) else "failed",
        finished=now(),
        failed_checks=failures,
        failed_notebooks=broken,
    )
    manifest.save()
    if report:
        from repro.report.build import build_report

        try:
            build_report(load_run(run_dir))
        except Exception as exc:
            broken.append(f"report: {type(exc).__name__}: {exc}")
    point_latest(run_dir)

    print(f"run folder: {run_dir}")
    for line in broken:
        print(f"FAILED notebook {line}")
    for line in failures:
        print(f"FAILED check {line}")
    if failures or broken:
        return 1
    print("all checks passed")
    return 0


def _terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _discard_partial(run_dir: Path, stem: str) -> None:
    """Before re-running a notebook on --resume, drop its partial tables so rows never mix."""
    for table in (run_dir / "results").glob(f"{stem[:2]}-*.csv"):
        table.unlink()
    executed = run_dir / "notebooks" / f"{stem}.ipynb"
    if executed.exists():
        executed.unlink()
