"""The notebook kernels a run starts: quiet, local and tied to the run.

* IPC sockets in a private temporary folder instead of TCP ports (no "Kernel is running over TCP
  without encryption" warning, nothing listening on the network);
* the kernel's own stdout/stderr (ipykernel's log, zmq noise on shutdown, C-level prints) go to a
  log file in the run folder, not to the terminal; cell outputs stay in the executed notebook;
* the run folder's lock is passed to the kernel, so the folder stays locked until the kernel is gone;
* ipykernel ends itself when its parent dies (``JPY_PARENT_PID``), and the cases it starts die with it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

#: ``sun_path`` holds 108 bytes; the socket names add a few.
MAX_SOCKET_PREFIX = 90


def kernel_manager_class(log_path: Path | None, keep_fds: tuple[int, ...] = ()) -> type:
    """A jupyter_client kernel manager class for papermill's ``kernel_manager_class``."""
    from jupyter_client.manager import AsyncKernelManager

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
            return cmd, kw

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            try:
                await super()._async_launch_kernel(kernel_cmd, **kw)
            finally:
                if self._log is not None:  # the kernel holds its own copy
                    self._log.close()
                    self._log = None

        async def _async_cleanup_resources(self, restart: bool = False) -> None:
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
