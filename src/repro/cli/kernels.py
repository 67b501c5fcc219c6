"""The notebook kernels a run starts: quiet, local and tied to the run.

* IPC sockets in a private temporary folder instead of TCP ports (no "Kernel is running over TCP
  without encryption" warning, nothing listening on the network);
* the kernel's own stdout/stderr (ipykernel's log, zmq noise on shutdown, C-level prints) go to a
  log file in the run folder, not to the terminal; cell outputs stay in the executed notebook;
* the run folder's lock is passed to the kernel, so the folder stays locked until the kernel is gone,
  and to nothing the kernel starts (:mod:`repro.cli.kernel_launch`);
* ipykernel ends itself when its parent dies (``JPY_PARENT_PID``), and the cases it starts die with it;
* when the kernel dies, what ended it can be named: its exit status (``ending["returncode"]``), the case
  it was running (the file named by ``REPRO_CURRENT_CASE_FILE``) and, for a fatal signal, Python's
  traceback in its log (``PYTHONFAULTHANDLER``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from repro.cli.kernel_launch import LOCK_FDS_ENV
from repro.core.evidence.watchdog import CURRENT_CASE_ENV

#: ``sun_path`` holds 108 bytes; the socket names add a few.
MAX_SOCKET_PREFIX = 90


def kernel_manager_class(
    log_path: Path | None,
    keep_fds: tuple[int, ...] = (),
    case_file: Path | None = None,
    ending: dict | None = None,
    env_extra: dict[str, str] | None = None,
) -> type:
    """A jupyter_client kernel manager class for papermill's ``kernel_manager_class``.

    ``keep_fds``: descriptors the kernel keeps and passes on to nothing it starts (the run folder's lock, the
    ledger pipe); ``case_file``: where the kernel writes the in-process case it is running; ``ending`` receives
    the kernel's exit status (``returncode``) once it has ended; ``env_extra``: added to its environment."""
    from jupyter_client.manager import AsyncKernelManager  # lazy: jupyter_client, only to run a notebook

    class RunKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self._socket_dir = tempfile.mkdtemp(prefix="repro-kernel-")
            prefix = os.path.join(self._socket_dir, "k")
            if len(prefix) > MAX_SOCKET_PREFIX:  # a long TMPDIR: keep TCP (the warning goes to the log)
                shutil.rmtree(self._socket_dir, ignore_errors=True)
                self._socket_dir = None
            else:
                self.transport, self.ip = "ipc", prefix
            self._log = None

        async def _async_pre_start_kernel(self, **kw):
            cmd, kw = await super()._async_pre_start_kernel(**kw)
            if log_path is not None:
                log_path.parent.mkdir(parents=True, exist_ok=True)
                self._log = open(log_path, "ab")
                kw["stdout"] = kw["stderr"] = self._log
            kw["pass_fds"] = tuple(keep_fds)
            env = kw["env"] = dict(kw.get("env") or os.environ)
            env["PYTHONFAULTHANDLER"] = "1"
            env.update(env_extra or {})
            if case_file is not None:
                env[CURRENT_CASE_ENV] = str(case_file)
            if "ipykernel_launcher" in cmd:  # the lock stays with the kernel, not with what it starts
                cmd = [*cmd[: cmd.index("ipykernel_launcher")], "repro.cli.kernel_launch"] + cmd[
                    cmd.index("ipykernel_launcher") + 1 :
                ]
                env[LOCK_FDS_ENV] = ",".join(str(fd) for fd in keep_fds)
            return cmd, kw

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            try:
                await super()._async_launch_kernel(kernel_cmd, **kw)
                if ending is not None:
                    ending["process"] = getattr(self.provisioner, "process", None)
            finally:
                if self._log is not None:  # the kernel holds its own copy
                    self._log.close()
                    self._log = None

        async def _async_cleanup_resources(self, restart: bool = False) -> None:
            if ending is not None and ending.get("process") is not None:
                ending["returncode"] = ending["process"].poll()
            await super()._async_cleanup_resources(restart=restart)
            if self._socket_dir and not restart:
                shutil.rmtree(self._socket_dir, ignore_errors=True)
            if log_path is not None and not restart and log_path.is_file() and log_path.stat().st_size == 0:
                log_path.unlink()  # a quiet kernel leaves no log
                try:
                    log_path.parent.rmdir()
                except OSError:
                    pass

    return RunKernelManager
