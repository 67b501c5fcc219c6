"""The process an implementation under test runs in, and the parent's handle on it.

``python -m repro.core.evidence.worker`` (:func:`main`) serves cases one after another: for each it imports the
implementation once (and hashes the module file it loaded, right after loading it), maps the case's arena
(:mod:`repro.core.evidence.arena`), calls the implementation on views of it and reports what only it can see: how
the call ended, how long it took, whether ``out`` still views the caller's buffer, and (in the bounds-checked
interpreter) the lanes it flagged. It judges nothing: the parent (:class:`CaseWorker`) compares the caller's buffer
with the reference and every input with its own copy through its own mapping of the arena, so nothing the
implementation's process can import decides a case's result.

The two talk through a pair of pipes the worker takes out of its environment before any code under test is
imported (the implementation shares its stdout and stderr). A case that runs past its time limit, a process that
dies (a fault, an exit, a kill) or one that never reaches its case ends that process; the next case starts a new
one. The worker dies with its parent and is killed with its whole process group.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from repro.core.evidence.arena import Arena, arena_folder, open_views, remove_folder, storage_bytes, view_of
from repro.core.evidence.cases import (
    CaseResult,
    buffer_identity,
    compare_bitwise,
    flagged_lines,
    gather_inputs,
    repointed,
    warm_up,
)
from repro.core.evidence.channel import IMPORT_DIR_ENV
from repro.core.evidence.isolate import ChildRun, ending
from repro.core.evidence.scenarios import GatherScenario
from repro.core.evidence.watchdog import CURRENT_CASE_ENV, die_with_parent, set_parent_death_signal
from repro.core.kernels.own import kernel_of
from repro.outcomes import Outcome, status_of_error
from repro.registry import ImplementationError, provenance

#: Environment variable naming the worker's pipe descriptors: ``<read>,<write>``.
FDS_ENV = "REPRO_WORKER_FDS"
#: Limit for a new worker to reach its first case: interpreter, torch, the implementation's import, a warm-up.
STARTUP_TIMEOUT_S = 300.0
#: How long a case process that closed its pipe may take to end before its group is killed.
EXIT_GRACE_S = 30.0
#: Characters of a dead worker's stderr kept (its end, where the error is).
OUTPUT_TAIL_CHARS = 16_000

_sha256 = hashlib.sha256  # bound before any code under test is imported


def _send(fd: int, message: dict) -> None:
    data = (json.dumps(message, default=str) + "\n").encode()
    while data:
        data = data[os.write(fd, data) :]


def module_record(path: str) -> dict[str, Any]:
    """Where ``package.module:function`` came from, read in the process that loaded it, right after loading: the
    module file's path and sha256, its package and version."""
    info = provenance(path)
    module = sys.modules.get(path.split(":", 1)[0])
    file = getattr(module, "__file__", None)
    if file and Path(file).is_file():
        info["module_file"] = str(Path(file).resolve())
        info["module_sha256"] = _sha256(Path(file).read_bytes()).hexdigest()
    return info


def serve(read_fd: int, write_fd: int) -> None:
    """Answer case requests until the parent closes the pipe (or a device fault leaves this process unusable)."""
    copy = torch._C.TensorBase.copy_  # bound before any code under test is imported
    loaded: dict[str, tuple[Any, dict]] = {}
    reader = os.fdopen(read_fd, "rb", buffering=0)
    _send(write_fd, {"ready": os.getpid()})
    for line in reader:
        request = json.loads(line)
        if "check" in request:  # import and check the implementation: a one-line error, or its module's record
            try:
                if request["implementation"] not in loaded:
                    fn = kernel_of(request["implementation"], request.get("param", "implementation"))
                    loaded[request["implementation"]] = (fn, module_record(request["implementation"]))
                _send(write_fd, {"checked": request["check"], "module": loaded[request["implementation"]][1]})
            except (Exception, SystemExit) as exc:  # the reason as the parent raises it, the exception's kind apart
                reason = str(exc) if isinstance(exc, ImplementationError) else _error_text(exc)
                _send(write_fd, {"checked": request["check"], "error": reason, "kind": type(exc).__name__})
            continue
        number, target, device = request["case"], request["implementation"], request["device"]
        reply: dict[str, Any] = {"done": number, "status": Outcome.OK, "error": ""}
        try:
            if target not in loaded:
                fn = kernel_of(target)
                loaded[target] = (fn, module_record(target))
            fn, reply["module"] = loaded[target]
            warm_up(device, request["checked"])
            views = {}
            for name, (data, placement) in open_views(Path(request["arena"]), request["layout"]).items():
                if device != "cpu":
                    held = torch.empty(placement.nbytes, dtype=torch.uint8, device=device)
                    copy(held, data)
                    views[name] = (view_of(held, placement), held, data)
                else:
                    views[name] = (view_of(data, placement), None, data)
        except (Exception, SystemExit) as exc:
            reply.update(status=Outcome.RAISED, error=_error_text(exc)[:500], traceback=traceback.format_exc()[-1500:])
            _send(write_fd, reply)
            continue
        out = views["out"][0]
        identity = buffer_identity(out)
        gather_lens = views["gather_lens"][0] if "gather_lens" in views else None
        args = (out, views["k_cache"][0], views["seq_lens"][0], gather_lens, views["block_table"][0])
        _send(write_fd, {"started": number})
        t0 = time.perf_counter()
        try:
            if request["checked"]:
                from repro.core.evidence.checked_interp import checked_interpreter  # lazy: patches Triton

                with checked_interpreter() as report:
                    fn(*args, request["block_size"], request["offset"])
                reply.update(
                    out_of_view_lanes=report.out_of_view_lanes,
                    out_of_bounds_lanes=report.out_of_bounds_lanes,
                    checked_lines=flagged_lines(report),
                )
            else:
                fn(*args, request["block_size"], request["offset"])
            if device != "cpu":
                torch.cuda.synchronize()
        except (Exception, SystemExit) as exc:
            text = _error_text(exc)
            reply.update(status=status_of_error(text), error=text[:500], traceback=traceback.format_exc()[-1500:])
        reply["seconds"] = round(time.perf_counter() - t0, 4)
        reply["out_repointed"] = repointed(identity, out)
        for _, held, data in views.values():  # the device's bytes back into the arena, where the parent reads them
            if held is not None:
                try:
                    copy(data, held)
                except Exception:  # a faulted device: the call's own error is the one to report
                    break
        _send(write_fd, reply)
        if device != "cpu" and reply["status"] == Outcome.FAULTED:
            return  # the device context is unusable after a fault: the next case gets a new process


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"SystemExit({exc.code!r}): the implementation tried to end the process"
    return f"{type(exc).__name__}: {exc}"


def main() -> int:
    raw = os.environ.pop(FDS_ENV, "")
    set_parent_death_signal()
    try:
        read_fd, write_fd = (int(x) for x in raw.split(","))
    except ValueError:
        print(f"{FDS_ENV} is not set: this process serves a CaseWorker, not a person", file=sys.stderr)
        return 2
    for fd in (read_fd, write_fd):
        os.set_inheritable(fd, False)  # nothing the implementation starts holds the pipes
    serve(read_fd, write_fd)
    return 0


# --------------------------------------------------------------------------------------------
# The parent's side.


class CaseWorker:
    """A case process for one or more implementations: started on the first case, again after one ends it.

    :meth:`run` sends one case and returns what the process reported, or how it ended when it reported nothing;
    judging the case (the caller's buffer, the inputs) is the caller's, through the arena it built.
    """

    def __init__(self, timeout_s: float, startup_s: float = STARTUP_TIMEOUT_S):
        self.timeout_s, self.startup_s = timeout_s, startup_s
        self.folder = arena_folder()
        self._held: tuple[GatherScenario, Arena] | None = None
        self._fresh_out: torch.Tensor | None = None
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0
        self._number = 0
        self._buffer = b""
        self.modules: dict[str, list[dict]] = {}  # every module record each implementation was loaded with

    # -- process
    def _start(self) -> None:
        to_read, to_worker = os.pipe()
        from_worker, to_write = os.pipe()
        env = {**os.environ, FDS_ENV: f"{to_read},{to_write}"}
        env.pop(CURRENT_CASE_ENV, None)
        self._stderr = tempfile.TemporaryFile()
        cwd = os.environ.get(IMPORT_DIR_ENV) or None
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "repro.core.evidence.worker"],
                pass_fds=(to_read, to_write),
                stdin=subprocess.DEVNULL,
                stdout=self._stderr,
                stderr=self._stderr,
                env=env,
                cwd=cwd if cwd and os.path.isdir(cwd) else None,
                start_new_session=True,
                preexec_fn=die_with_parent(),
            )
        finally:
            os.close(to_read)
            os.close(to_write)
        self._to, self._from = to_worker, from_worker
        self._buffer = b""
        self.started_at = time.perf_counter()
        self.ended = False  # the process closed its pipe: it ended, or is ending

    def _alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close(self) -> None:
        """End the process and whatever it left in its group."""
        if self.proc is None:
            return
        for fd in (self._to, self._from):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self._stderr.close()
        self.proc = None

    def shut(self) -> None:
        """End the process and remove the arena folder (the worker is done)."""
        self.close()
        self._drop_arena()
        remove_folder(self.folder)

    def __enter__(self) -> CaseWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shut()

    def case(
        self,
        implementation: str,
        scenario: GatherScenario,
        reference: torch.Tensor,
        checked: bool = False,
    ) -> CaseResult:
        """Run ``implementation`` on ``scenario`` in the case process and judge it here: the caller's buffer
        against ``reference``, every input against this process's own copy, both read through this process's
        mapping of the arena."""
        result = CaseResult(implementation=implementation, status=Outcome.OK, total_tokens=scenario.total_tokens)
        arena = self._arena(scenario)
        try:
            report = self.run(
                {
                    "implementation": implementation,
                    "arena": str(self.folder),
                    "layout": arena.layout(),
                    "block_size": scenario.spec.block_size,
                    "offset": scenario.spec.offset,
                    "device": scenario.spec.device,
                    "checked": checked,
                }
            )
            result.status = Outcome(report.get("status", Outcome.RAISED))
            result.error = str(report.get("error") or "")[:500]
            result.returncode = report.get("returncode")
            result.out_repointed = str(report.get("out_repointed") or "")
            for name in ("out_of_view_lanes", "out_of_bounds_lanes"):
                if isinstance(report.get(name), int):
                    setattr(result, name, report[name])
            result.checked_lines = str(report.get("checked_lines") or "")
            result.extra = {k: report[k] for k in ("seconds", "traceback") if k in report}
            if report.get("module"):
                result.extra["module_sha256"] = report["module"].get("module_sha256")
            changed = [
                name
                for name, tensor in gather_inputs(scenario).items()
                if not torch.equal(arena.storage(name), storage_bytes(tensor).cpu())
            ]
            result.changed_inputs = ", ".join(changed)
            if result.status == Outcome.OK:
                out = arena.view("out").to(scenario.k_cache.device)
                result.mismatched_tokens, result.stray_writes = compare_bitwise(out, reference, scenario)
            for name in changed:  # put back for the next implementation on this case
                arena.storage(name).copy_(storage_bytes(gather_inputs(scenario)[name]).cpu())
            arena.storage("out").copy_(self._fresh_out)
        except BaseException:
            self._drop_arena()
            raise
        return result

    def _arena(self, scenario: GatherScenario) -> Arena:
        """The case's arena: built once per scenario, shared by the implementations run on it one after another
        (each call puts back what the one before changed)."""
        if self._held is not None and self._held[0] is scenario:
            return self._held[1]
        self._drop_arena()
        fresh = scenario.fresh_out()
        arena = Arena.build(self.folder, {"out": fresh, **gather_inputs(scenario)})
        self._fresh_out = storage_bytes(fresh).cpu()
        self._held = (scenario, arena)
        return arena

    def _drop_arena(self) -> None:
        if self._held is not None:
            self._held[1].remove()
        self._held, self._fresh_out = None, None

    # -- messages
    def _receive(self, deadline: float) -> dict | None:
        """The next message, or None when the process closed its end (it ended: :attr:`ended` is set) or
        ``deadline`` passed."""
        while b"\n" not in self._buffer:
            left = deadline - time.perf_counter()
            if left <= 0:
                return None
            ready, _, _ = select.select([self._from], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(self._from, 1 << 16)
            if not chunk:
                self.ended = True
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            message = {}
        return message if isinstance(message, dict) else {}

    def _stderr_tail(self) -> str:
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - OUTPUT_TAIL_CHARS * 4))
        return self._stderr.read().decode(errors="replace")[-OUTPUT_TAIL_CHARS:]

    def check(self, implementation: str, param: str = "implementation") -> dict:
        """Import and check ``implementation`` in the case process (where it will run): its module's record, or
        :class:`~repro.registry.ImplementationError` with the one-line reason (an import that ends or stalls the
        process included)."""
        if not self._alive():
            self.close()
            self._start()
        self._number += 1
        number = self._number
        try:
            _send(self._to, {"check": number, "implementation": implementation, "param": param})
        except OSError:
            self.close()
            self._start()
            _send(self._to, {"check": number, "implementation": implementation, "param": param})
        deadline = time.perf_counter() + self.startup_s
        while (message := self._receive(deadline)) is not None:
            if message.get("checked") != number:
                continue
            if "error" in message:
                raise ImplementationError(str(message["error"]))
            self.modules.setdefault(implementation, [])
            if message["module"] not in self.modules[implementation]:
                self.modules[implementation].append(message["module"])
            return message["module"]
        how = "ended the case process" if self.ended or not self._alive() else "did not finish"
        tail = self._stderr_tail().strip().splitlines()
        self.close()
        raise ImplementationError(
            f"{param}: importing {implementation!r} {how} within {self.startup_s:g} s"
            + (f": {tail[-1][:200]}" if tail else "")
        )

    def run(self, request: dict) -> dict:
        """One case: ``request`` names the implementation, the arena and its layout, ``block_size``, ``offset``,
        ``device`` and ``checked``. Returns the worker's report (``status``, ``error``, ``out_repointed``, ...) or,
        when it sent none, a report whose ``status`` names how its process ended."""
        if not self._alive():
            self.close()
            self._start()
        self._number += 1
        number = self._number
        try:
            _send(self._to, {**request, "case": number})
        except OSError:  # the process ended between cases: a new one takes the case
            self.close()
            self._start()
            _send(self._to, {**request, "case": number})
        clock = time.perf_counter()
        deadline = clock + self.startup_s
        started = False
        while True:
            message = self._receive(deadline)
            if message is None:
                break
            if message.get("started") == number:
                started, clock = True, time.perf_counter()
                deadline = clock + self.timeout_s
            elif message.get("done") == number:
                if message.get("module"):
                    seen = self.modules.setdefault(request["implementation"], [])
                    if message["module"] not in seen:
                        seen.append(message["module"])
                return message
        timed_out = not self.ended and self._alive()
        if timed_out:  # no answer in time: the process and its group go
            os.killpg(self.proc.pid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=EXIT_GRACE_S)
        except subprocess.TimeoutExpired:  # it closed its pipe and lingers: it goes too
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        child = ChildRun(
            self.proc.returncode, "", self._stderr_tail(), time.perf_counter() - clock, timed_out, started, None
        )
        status, error = ending(child, self.timeout_s, self.startup_s)
        self.close()
        return {"done": number, "status": status, "error": error, "returncode": child.returncode}


if __name__ == "__main__":
    sys.exit(main())
