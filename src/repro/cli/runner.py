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

from repro.parameters import ParameterError, validate_all
from repro.paths import notebooks_dir, repo_root, runs_dir
from repro.profiles import ProfileError, resolve

REPORT_NOTEBOOK = "90-report.ipynb"
#: Per-cell execution limit; the sweeps bound their own cases well below it.
CELL_TIMEOUT_S = 1800


class UsageError(ValueError):
    """Bad input: one line naming the parameter and what is accepted; exit code 2."""


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


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


def notebook_default(declared: dict, name: str):
    """A parameter's default as the notebooks declare it (the first notebook that has it)."""
    import ast

    defaults = declared.get(name, {})
    if not defaults:
        return None
    try:
        return ast.literal_eval(next(iter(defaults.values())))
    except (ValueError, SyntaxError):
        return None


def cross_check(params: dict, profile: str, declared: dict | None = None) -> None:
    """Checks that need several parameters, the profile or an import; all before any GPU work."""
    from repro.evidence.environment import find_compute_sanitizer
    from repro.registry import ImplementationError, load_implementation
    from repro.profiles import PROFILES
    from repro.geometry.layout import ceil_div

    for name in ("implementation", "reference_gather"):
        if params.get(name):
            try:
                load_implementation(params[name], name)
            except ImplementationError as exc:
                raise UsageError(str(exc)) from None
    seq_len_max = params.get("seq_len_max") or PROFILES[profile].gather_seq_len_max
    block = params.get("cache_block_size") or notebook_default(declared or {}, "cache_block_size") or 1
    width = params.get("backing_width", 0)
    if width and width <= ceil_div(seq_len_max, block):
        raise UsageError(f"backing_width: {width} is not wider than the {ceil_div(seq_len_max, block)} columns "
                         f"a {seq_len_max}-token request needs at cache_block_size {block}; accepted: 0 (auto) "
                         f"or more than {ceil_div(seq_len_max, block)}")
    if params.get("sanitizer") == "required" and (profile != "gpu" or find_compute_sanitizer() is None):
        raise UsageError("sanitizer: 'required' but compute-sanitizer is not available here "
                         f"(profile {profile}); accepted: 'auto' or 'off'")


def prepare_run_dir(out: str | None, resume: bool) -> Path:
    run_dir = Path(out) if out else runs_dir() / dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    if run_dir.exists() and any(run_dir.iterdir()) and not resume:
        raise UsageError(f"--out: {run_dir} already holds a run; accepted: a new or empty folder, "
                         "or --resume to finish that run")
    if resume and not (run_dir / "manifest.json").exists():
        raise UsageError(f"--resume: {run_dir} holds no manifest.json to resume")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"--out: cannot write to {run_dir} ({exc.strerror or exc}); accepted: a writable folder")
    return run_dir


class Manifest:
    """``manifest.json``, rewritten after every step so a killed run says how far it got."""

    def __init__(self, path: Path, data: dict):
        self.path, self.data = path, data

    @classmethod
    def load(cls, path: Path) -> "Manifest":
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
        pm.execute_notebook(str(src), str(dst), parameters=parameters, kernel_name="python3",
                            progress_bar=progress, execution_timeout=CELL_TIMEOUT_S,
                            request_save_on_cell_execute=True, cwd=str(repo_root()))
    except pm.PapermillExecutionError as exc:
        status = {"status": "failed", "error": f"{exc.ename}: {exc.evalue}", "cell": exc.exec_count}
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # dead kernel, cell timeout, ...
        status = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"[:2000]}
    status["seconds"] = round(time.perf_counter() - t0, 1)
    return status


def run(profile_name: str, out: str | None, assignments: list[str], resume: bool = False,
        selection: list[str] | None = None, report: bool = True) -> int:
    try:
        profile = resolve(profile_name)
        paths = notebooks(selection)
        declared = declared_parameters(paths)
        params = validate_all(assignments, {k: list(v) for k, v in declared.items()})
        cross_check(params, profile, declared)
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
            print(f"error: --resume: {run_dir} was run with profile {manifest.data.get('profile')!r} and "
                  f"parameters {manifest.data.get('parameters')}; accepted: the same profile and -p values",
                  file=sys.stderr)
            return 2
    else:
        from repro.evidence.environment import describe

        manifest = Manifest(manifest_path, {
            "status": "running", "profile": profile, "parameters": params,
            "command": " ".join(["python -m repro run", f"--profile {profile_name}", *[f"-p {a}" for a in assignments]]),
            "started": now(), "finished": None, "environment": describe(repo_root()), "notebooks": {},
        })
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
            print(f"[{path.stem}] {status['status']} in {status['seconds']} s"
                  + (f": {status['error'].splitlines()[0]}" if status["error"] else ""), flush=True)
    except KeyboardInterrupt:
        manifest.data.update(status="interrupted", finished=now())
        manifest.save()
        print(f"interrupted: finished results are kept in {run_dir}", file=sys.stderr)
        return 130

    from repro.evidence.results import failed_checks, read_results

    failures = [f for frame in read_results(run_dir).values() for f in failed_checks(frame)]
    broken = [f"{name}: {st.get('error', '').splitlines()[0] if st.get('error') else st['status']}"
              for name, st in manifest.data["notebooks"].items() if st["status"] != "ok"]
    manifest.data.update(status="complete" if not (failures or broken) else "failed", finished=now(),
                         failed_checks=failures, failed_notebooks=broken)
    manifest.save()
    if report:
        from repro.report.render import build_report

        try:
            build_report(run_dir)
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
