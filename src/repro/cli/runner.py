"""``python -m repro run``: every notebook through papermill into one run folder, then the report.

Exit codes: 0 every check passed; 1 a check failed, a notebook broke or the run stopped on a file-system
fault (each named; after a fault ``--resume`` goes on); 2 bad input, a run folder in use or one
``--resume`` does not accept, reported before anything runs and with nothing written; 130 interrupted
(Ctrl-C, SIGTERM or SIGHUP; the run folder keeps what finished, ``--resume`` goes on).

A notebook counts as run only when papermill executed every one of its cells (papermill itself takes a
``SystemExit(0)`` as success and stops there). ``--resume`` continues a run that did not finish (killed,
interrupted, stopped), with the code it started with; a finished run's verdict stands.
"""

from __future__ import annotations

import ast
import datetime as dt
import errno
import json
import logging
import os
import shlex
import sys
import time
from pathlib import Path

from repro.cli import interrupts
from repro.cli.code_identity import code_identity, differences
from repro.cli.execute import KernelWatch, execute_notebook, shown_path
from repro.cli.params import format_value, parse_assignments
from repro.cli.processes import become_subreaper, descendants, end_leftovers
from repro.cli.runfolder import RunFolderError, RunLock, new_default_folder, open_for_run
from repro.core.analysis import written
from repro.core.evidence.channel import IMPORT_DIR_ENV
from repro.core.evidence.environment import describe, host_identity_error
from repro.parameters import RESERVED, ParameterError, notebook_names, parameter_classes
from repro.paths import notebooks_dir, package_checkout, runs_dir
from repro.profiles import ProfileError, resolve
from repro.registry import is_registered, load_implementation, provenance

#: Manifest statuses of a run that ended before its end and that ``--resume`` continues.
RESUMABLE = ("running", "interrupted", "stopped")
#: Manifest status of a run stopped by a file-system fault (disk full, a read-only folder, ...).
STOPPED = "stopped"
#: Limit for importing an implementation from outside this package in a child process.
IMPORT_TIMEOUT_S = 120.0


class UsageError(ValueError):
    """Bad input: one line naming the parameter and what is accepted; exit code 2."""


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def say(text: str = "", err: bool = False) -> None:
    """Print a line; a closed terminal or pipe never ends the run."""
    stream = sys.stderr if err else sys.stdout
    try:
        stream.write(text + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def notebooks(selection: list[str] | None = None) -> list[Path]:
    """The notebooks a run executes, in reading order: this package's and those installed packages register
    (:func:`repro.parameters.notebook_names`); the report notebook is none of them."""
    found = sorted(notebooks_dir() / name for name in notebook_names())
    if selection:
        chosen = [p for p in found if any(p.name.startswith(s) for s in selection)]
        if len(chosen) != len(selection) or not chosen or any(not s for s in selection):
            names = ", ".join(p.stem for p in found)
            raise UsageError(f"--notebooks: {selection} does not name notebooks; accepted: prefixes of {names}")
        return chosen
    return found


def declared_parameters(paths: list[Path]) -> dict[str, dict[str, str]]:
    """``{name: {notebook: default source}}`` from each notebook's ``parameters`` cell (as papermill reads it)."""
    declared: dict[str, dict[str, str]] = {}
    for path in paths:
        cells = json.loads(path.read_text())["cells"]
        source = next(
            ("".join(c["source"]) for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])), ""
        )
        for node in ast.parse(source).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                declared.setdefault(node.targets[0].id, {})[path.stem] = ast.get_source_segment(source, node.value)
    return declared


def notebook_values(declared: dict[str, dict[str, str]], stem: str, params: dict) -> dict:
    """Every parameter one notebook will see: its own defaults, overridden by ``-p`` values it declares."""
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


class ImportChecks:
    """Implementation paths checked before the run, with their provenance for the manifest.

    A registered gather (this package's or a registered package's own) is only located and hashed, not imported (its
    module imports torch and Triton, seconds the notebook's kernel pays anyway); another path of this package is
    imported here; any other module in a child process with a time limit, so one that exits, hangs or crashes on
    import is a one-line error, never the end of the run.
    """

    def __init__(self) -> None:
        self.provenance: dict[str, dict] = {}

    def __call__(self, path: str, param: str) -> None:
        if path not in self.provenance:
            if is_registered(path):
                self.provenance[path] = provenance(path)
            elif path.split(":", 1)[0].split(".")[0] == "repro":
                load_implementation(path, param)
                self.provenance[path] = provenance(path)
            else:
                from repro.core.evidence.isolate import check_implementation_isolated  # lazy: torch

                self.provenance[path] = check_implementation_isolated(path, param, IMPORT_TIMEOUT_S)

    def used(self, values: dict) -> dict:
        """Provenance (package version, module hash) of every implementation a notebook will load."""
        names = ("implementation", "reference_gather")
        return {name: self.provenance[values[name]] for name in names if values.get(name) in self.provenance}


def rerun_command(profile: str, run_dir: Path, selection: list[str] | None, params: dict) -> str:
    """The command that reproduces this run, shell-quoted, to paste at the checkout root."""
    words = ["python", "-m", "repro", "run", "--profile", profile, "--out", shown_path(run_dir)]
    if selection:
        words += ["--notebooks", *selection]
    for name, value in params.items():
        words += ["-p", f"{name}={format_value(value)}"]
    return shlex.join(words)


class Manifest:
    """``manifest.json``, rewritten after every step so a killed run says how far it got."""

    def __init__(self, path: Path, data: dict):
        self.path, self.data = path, data

    @classmethod
    def load(cls, path: Path) -> Manifest:
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RunFolderError(
                f"--resume: {path} is damaged ({exc}); accepted: the folder of an earlier run "
                "with its manifest.json intact"
            ) from None
        if not isinstance(data, dict) or not isinstance(data.get("notebooks"), dict):
            raise RunFolderError(
                f"--resume: {path} is not a run manifest (a JSON object with 'notebooks'); "
                "accepted: the folder of an earlier run"
            )
        return cls(path, data)

    def save(self) -> None:
        """Write it whole or not at all; a write the folder refuses is a ``RunFolderWriteError`` naming it."""
        from repro.core.evidence.results import RunFolderWriteError  # lazy: pandas

        tmp = self.path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(self.data, indent=2, default=str) + "\n")
            tmp.replace(self.path)
        except OSError as exc:
            raise RunFolderWriteError.of(self.path, exc) from None


def point_latest(run_dir: Path) -> None:
    """``runs/latest`` follows runs written under ``runs/``; a folder elsewhere leaves it alone."""
    runs = runs_dir().resolve()
    if runs not in run_dir.resolve().parents:
        return
    latest = runs / "latest"
    if latest.exists() and not latest.is_symlink():  # a folder or file of the user's: never replaced
        raise OSError(errno.EEXIST, f"{latest} is not a link this command made; it is left as it is")
    target = os.path.relpath(run_dir.resolve(), runs)
    tmp = latest.with_name(f"latest.tmp{os.getpid()}")
    try:
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        tmp.symlink_to(target)
        tmp.replace(latest)
    finally:
        if tmp.is_symlink():  # the link was not moved into place: no stray link is left
            tmp.unlink()


#: Loggers of the notebook machinery. Nothing configures logging here, so Python's last-resort handler
#: would print their warnings on stderr (e.g. nbclient's "Kernel died while waiting for execute reply."
#: when a signal ends a run, and asyncio's "Task exception was never retrieved" for nbclient's abandoned
#: cell task); they go to ``logs/notebook-machinery.log`` in the run folder instead. asyncio is used in this
#: process only by the notebook client.
MACHINERY_LOGGERS = ("papermill", "nbclient", "traitlets", "jupyter_client", "asyncio")


def keep_machinery_logs(run_dir: Path) -> None:
    """stderr carries one line per outcome; what the notebook machinery logs stays in the run folder."""
    handler = logging.FileHandler(run_dir / "logs" / "notebook-machinery.log", delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    handler.set_name("repro-run-folder")
    for name in MACHINERY_LOGGERS:
        log = logging.getLogger(name)
        for old in [h for h in log.handlers if h.get_name() == "repro-run-folder"]:  # an earlier run, same process
            log.removeHandler(old)
            old.close()
        log.addHandler(handler)
        log.propagate = False


def first_line(text: str) -> str:
    lines = [ln for ln in str(text).splitlines() if ln.strip()]
    return lines[0] if lines else ""


def import_from_here() -> None:
    """An implementation is imported as this command's own Python would import it, in every process of the run:
    from this folder, with the ``PYTHONPATH`` entries read from here (a relative entry would otherwise name another
    folder in the notebook kernels, which run from the checkout)."""
    entries = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if any(entries):
        os.environ["PYTHONPATH"] = os.pathsep.join(os.path.abspath(e or os.curdir) for e in entries)
    os.environ[IMPORT_DIR_ENV] = os.getcwd()


def check_out(out: str | None) -> None:
    """``--out`` names a folder: not empty, and a path this command can print and record (UTF-8)."""
    if out is None:
        return
    if not out.strip():
        raise UsageError(f"--out: {out!r} names no folder; accepted: a folder path, or no --out for runs/<timestamp>")
    try:
        out.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"--out: {out!a} is not valid UTF-8; accepted: a UTF-8 folder path") from None


def run(
    profile_name: str,
    out: str | None,
    assignments: list[str],
    resume: bool = False,
    selection: list[str] | None = None,
    report: bool = True,
) -> int:
    try:
        try:
            check_out(out)
            import_from_here()
            profile = resolve(profile_name)
            if (why := host_identity_error()) is not None:
                raise UsageError(why)
            paths = notebooks(selection)
            declared = declared_parameters(paths)
            params = parse_assignments(assignments, declared, declared_parameters(notebooks()) if selection else None)
            imports, seen = ImportChecks(), {}
            for path in paths:
                values = notebook_values(declared, path.stem, params)
                seen.update(parameter_classes()[path.name].build(values, profile, imports).values())
            if out is not None:
                lock = open_for_run(Path(out), resume)
                run_dir = Path(out)
            elif resume:
                raise UsageError("--resume: needs --out naming the run folder to finish")
            else:
                run_dir = new_default_folder(runs_dir(), dt.datetime.now().strftime("%Y%m%d-%H%M%S"))
                lock = open_for_run(run_dir, False)
        except (ProfileError, ParameterError, UsageError, RunFolderError) as exc:
            say(f"error: {exc}", err=True)
            return 2
    except KeyboardInterrupt:
        say("interrupted before anything ran; nothing was written", err=True)
        return 130

    keep = frozenset(descendants())  # processes of ours from before this run (an in-process caller's)
    adopted = become_subreaper()
    try:
        implementations = imports.used(seen)
        return _run_locked(
            run_dir, lock, profile, params, declared, paths, resume, selection, report, implementations, keep
        )
    finally:
        if adopted:
            end_leftovers(keep)
            become_subreaper(False)
        lock.release()


def _open_manifest(
    run_dir: Path, profile: str, params: dict, selection: list[str] | None, resume: bool, implementations: dict
) -> Manifest:
    """The manifest of a new run, or of the run ``--resume`` continues: refused (:class:`RunFolderError`) when
    that run finished, was run with other values or with other code."""
    path = run_dir / "manifest.json"
    if not resume:
        environment = describe(package_checkout())
        return Manifest(
            path,
            {
                "status": "running",
                "profile": profile,
                "parameters": params,
                "command": rerun_command(profile, run_dir, selection, params),
                "started": now(),
                "finished": None,
                "environment": environment,
                "code": code_identity(package_checkout(), notebooks_dir(), implementations, environment),
                "implementations": implementations,
                "notebooks": {},
            },
        )
    manifest = Manifest.load(path)
    data = manifest.data
    if data.get("profile") != profile or data.get("parameters") != params:
        raise RunFolderError(
            f"--resume: {run_dir} was run with profile {data.get('profile')!r} and parameters "
            f"{data.get('parameters')}; accepted: the same profile and -p values"
        )
    status = data.get("status")
    if status not in RESUMABLE:
        checks = len(data.get("failed_checks") or [])
        broke = sum(written.broke(st) for st in (data.get("notebooks") or {}).values())
        raise RunFolderError(
            f"--resume: {run_dir} holds a finished run (status {status!r}: {checks} failed check(s), {broke} "
            "notebook(s) broke), whose verdict stands; accepted: a run that was interrupted, killed or stopped "
            "(status running, interrupted or stopped); to run it again, use a new --out"
        )
    environment = data.get("environment") or {}
    recorded = data.get("code") or {
        "git_sha": environment.get("git_sha"),
        "git_dirty": environment.get("git_dirty"),
        "implementations": {k: v.get("module_sha256") for k, v in (data.get("implementations") or {}).items()},
    }
    damage = written.problems(run_dir, data)
    if damage:
        raise RunFolderError(
            f"--resume: {run_dir}: {damage[0]}; its finished notebooks' results are not what they wrote; "
            "accepted: a run folder as its run left it, or a new --out"
        )
    changed = differences(recorded, code_identity(package_checkout(), notebooks_dir(), implementations))
    if changed:
        raise RunFolderError(
            f"--resume: the code differs from the code {run_dir} was started with ({'; '.join(changed)}); "
            "accepted: the same checkout and implementation, or a new --out for a run of this code"
        )
    if status == "running":
        say(f"taking over {run_dir}: the run writing it ended without finishing")
    return manifest


def _stopped(manifest: Manifest, run_dir: Path, why: str) -> int:
    """A file-system fault stops the run: one line naming the file, what finished kept, ``--resume`` to go on."""
    manifest.data.update(status=STOPPED, stopped=why, finished=now())
    for st in manifest.data["notebooks"].values():
        if st.get("status") == "running":
            st.update(status=STOPPED, error=why)
    try:
        manifest.save()
    except OSError:
        pass  # the manifest keeps an earlier state ("running"), which --resume accepts as well
    say(
        f"error: {why}; the run stopped, keeping what finished in {run_dir}; once that is fixed, resume with: "
        f"{manifest.data['command']} --resume",
        err=True,
    )
    return 1


def _cannot_write(exc: OSError, folder: Path) -> str:
    return f"cannot write {exc.filename or f'into {folder}'} ({exc.strerror or exc})"


def _results(run_dir: Path) -> set[str]:
    folder = run_dir / "results"
    return {p.relative_to(run_dir).as_posix() for p in folder.iterdir()} if folder.is_dir() else set()


#: The facts file where notebook 02 records the module its case processes loaded the implementation from.
LOADED_MODULE = "results/02-implementation.json"


def _record_loaded_module(data: dict, run_dir: Path, tables: dict[str, dict]) -> None:
    """The implementation's provenance in the manifest becomes that of the module the case processes loaded (read
    there, right after loading it): its sha256 is the code's identity for ``--resume``; the pre-run check's stays as
    ``probe_sha256``. Modules that differed between case processes are recorded as such (the run fails)."""
    record = tables.get(LOADED_MODULE)
    path = run_dir / LOADED_MODULE
    if record is None or written.read_record(path) != record:  # absent, or not what the notebook wrote
        return
    try:
        loaded = json.loads(path.read_text())["loaded"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    if not isinstance(loaded, list) or not loaded or not all(isinstance(m, dict) for m in loaded):
        return
    info = data.setdefault("implementations", {}).setdefault("implementation", {})
    info.update({"probe_sha256": info.get("module_sha256"), **loaded[0], "loaded": loaded})
    data.setdefault("code", {}).setdefault("implementations", {})["implementation"] = loaded[0].get("module_sha256")
    hashes = list(dict.fromkeys(str(m.get("module_sha256")) for m in loaded))
    if len(hashes) > 1:
        data["implementation_changed"] = (
            f"the implementation's module changed while the run went on: the case processes loaded "
            f"{', then '.join(h[:12] for h in hashes)} (sha256)"
        )


def _recorded_results(run_dir: Path, before: set[str], ledger: dict | None) -> dict[str, dict]:
    """What the run records a notebook wrote: what its kernel sent as it closed its results, else (a kernel that
    ended before it closed them) the files it added, as they are now."""
    if ledger is not None:
        return {str(k): v for k, v in ledger.items() if isinstance(v, dict)}
    added = sorted(_results(run_dir) - before)
    return {rel: record for rel in added if (record := written.read_record(run_dir / rel)) is not None}


def _run_locked(
    run_dir: Path,
    lock: RunLock,
    profile: str,
    params: dict,
    declared: dict,
    paths: list[Path],
    resume: bool,
    selection: list[str] | None,
    report: bool,
    implementations: dict,
    keep: frozenset[int] = frozenset(),
) -> int:
    from repro.core.evidence.results import RunFolderWriteError  # lazy: pandas

    if profile == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # inherited by every notebook kernel
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    progress = sys.stderr.isatty() and not os.environ.get("CI")
    try:
        manifest = _open_manifest(run_dir, profile, params, selection, resume, implementations)
    except RunFolderError as exc:
        say(f"error: {exc}", err=True)
        return 2
    except KeyboardInterrupt:
        say(f"interrupted before any notebook ran; {run_dir} holds no results", err=True)
        return 130
    manifest.data.update(status="running", finished=None)
    manifest.data.pop("stopped", None)
    try:
        (run_dir / "logs").mkdir(exist_ok=True)
        keep_machinery_logs(run_dir)
        manifest.save()
        (run_dir / "notebooks").mkdir(exist_ok=True)
    except OSError as exc:
        return _stopped(
            manifest, run_dir, str(exc) if isinstance(exc, RunFolderWriteError) else _cannot_write(exc, run_dir)
        )

    try:
        for path in paths:
            done = manifest.data["notebooks"].get(path.stem, {})
            if resume and written.settled(done):  # its outcome stands, failed checks or a break included
                say(f"[{path.stem}] already {'complete' if done.get('status') == 'ok' else 'finished (failed)'}, kept")
                continue
            if resume:
                _discard_partial(run_dir, path.stem)
            nb_params = {"profile": profile, "run_dir": str(run_dir.resolve())}
            nb_params.update({k: v for k, v in params.items() if path.stem in declared.get(k, {})})
            manifest.data["notebooks"][path.stem] = {"status": "running", "started": now()}
            manifest.save()
            before = _results(run_dir)
            watch = KernelWatch(run_dir, path.stem, lock)
            status = execute_notebook(path, run_dir / "notebooks" / path.name, nb_params, progress, watch)
            if interrupts.received():  # a signal that came as the notebook ended and a library swallowed
                raise KeyboardInterrupt("a signal while the notebook ended")
            left = end_leftovers(keep)  # before the results are recorded: nothing the notebook started is left
            if left:
                status["ended_left_running"] = left
            status["tables"] = _recorded_results(run_dir, before, watch.ledger())
            if watch.ledger() is None:
                status["ledger"] = False
            _record_loaded_module(manifest.data, run_dir, status["tables"])
            manifest.data["notebooks"][path.stem] = status
            manifest.save()
            say(
                f"[{path.stem}] {status['status']} in {status['seconds']} s"
                + (f": {first_line(status['error'])}" if status["error"] else "")
            )
            if left:
                say(f"[{path.stem}] ended {len(left)} process(es) it left running: {'; '.join(left)}")
    except KeyboardInterrupt:
        interrupts.ignore()  # a second Ctrl-C must not cut the manifest write short
        for st in manifest.data["notebooks"].values():
            if st.get("status") == "running":
                st["status"] = "interrupted"
        manifest.data.update(status="interrupted", finished=now())
        try:
            manifest.save()
        except OSError:
            pass
        say(
            f"interrupted: finished results are kept in {run_dir}; resume with: {manifest.data['command']} --resume",
            err=True,
        )
        return 130
    except OSError as exc:  # the runner's own writes: the manifest, the executed notebook, the logs
        why = str(exc) if isinstance(exc, RunFolderWriteError) else _cannot_write(exc, run_dir)
        return _stopped(manifest, run_dir, why)

    from repro.core.analysis.rundata import RunFolderError as DamagedRun  # lazy: pandas, only to read a run
    from repro.core.analysis.rundata import load_run  # lazy: pandas, only to read a run
    from repro.core.analysis.verdict import rule_disagreements, undecided  # lazy: pandas, only to read a run
    from repro.report.phrases import rule_disagreement, undecided_run  # lazy: jinja2, only to word a failure

    try:
        damage = written.problems(run_dir, manifest.data)  # held to the runner's own record, not the file's
        try:
            if damage:
                failures = [f"run folder: {line}" for line in damage]
            else:
                results = load_run(run_dir, manifest.data)
                questions = undecided(results)
                failures = results.failures() + [rule_disagreement(d) for d in rule_disagreements(results)]
                failures += [undecided_run(questions)] if questions is not None else []
                if manifest.data.get("implementation_changed"):
                    failures.append(f"provenance: {manifest.data['implementation_changed']}")
        except DamagedRun as exc:  # a table the notebooks wrote cannot be read back
            failures = [f"run folder: {exc}"]
        line_of = {
            name: f"{name}: {first_line(st.get('error')) or st['status']}"
            for name, st in manifest.data["notebooks"].items()
            if st["status"] != "ok"
        }
        broken = list(line_of.values())
        at_gate = {
            line_of[name] for name, st in manifest.data["notebooks"].items() if name in line_of and written.finished(st)
        }
        manifest.data.update(
            status="complete" if not (failures or broken) else "failed",
            finished=now(),
            failed_checks=failures,
            failed_notebooks=broken,
        )
        manifest.save()
    except KeyboardInterrupt:  # every notebook ran; the verdict was not recorded: --resume records it
        interrupts.ignore()
        say(
            f"interrupted after every notebook ran: the results are kept in {run_dir}; finish with: "
            f"{manifest.data['command']} --resume",
            err=True,
        )
        return 130
    except OSError as exc:
        return _stopped(manifest, run_dir, str(exc))
    if report:
        t0 = time.perf_counter()
        try:
            from repro.report.build import write_report  # lazy: matplotlib, only to write a report

            write_report(load_run(run_dir))
            say(f"[report] ok in {time.perf_counter() - t0:.1f} s")
        except KeyboardInterrupt:
            say(
                f"interrupted while writing the report; the results are complete in {run_dir} and "
                f"`python -m repro report {shlex.quote(shown_path(run_dir))}` writes it",
                err=True,
            )
            return 130
        except OSError as exc:
            broken.append(f"report: {_cannot_write(exc, run_dir)}")
            say(f"[report] failed: {_cannot_write(exc, run_dir)}")
        except Exception as exc:
            broken.append(f"report: {type(exc).__name__}: {first_line(exc)}")
            say(f"[report] failed: {type(exc).__name__}: {first_line(exc)}")
        finally:
            end_leftovers(keep)
    try:
        point_latest(run_dir)
    except OSError as exc:
        say(f"note: runs/latest not updated ({exc.strerror or exc})", err=True)

    interrupts.ignore()  # the run is recorded and reported: what is left is telling its verdict
    if interrupts.received():  # a signal during the report that a library swallowed
        say(f"interrupted at the end: the run and its report are complete in {run_dir}", err=True)
        return 130
    say(f"run folder: {run_dir}")
    # A notebook that ended at its checks gate finished: its failed checks are listed one by one below.
    broke = [line for line in broken if not (failures and line in at_gate)]
    for line in broke:
        say(f"FAILED notebook {line}")
    for line in failures:
        say(f"FAILED check {line}")
    if failures or broken:
        say(f"FAILED: {len(failures)} check(s) failed, {len(broke)} notebook(s) broke")
        return 1
    say("all checks passed")
    return 0


def _discard_partial(run_dir: Path, stem: str) -> None:
    """Before re-running a notebook on --resume, drop its partial tables so rows never mix."""
    for table in (run_dir / "results").glob(f"{stem[:2]}-*.csv"):
        table.unlink()
    for facts in (run_dir / "results").glob(f"{stem[:2]}-*.json"):
        facts.unlink()
    executed = run_dir / "notebooks" / f"{stem}.ipynb"
    if executed.exists():
        executed.unlink()
