"""``python -m repro.cli.kernel_launch -f CONNECTION_FILE``: a notebook kernel (ipykernel) that keeps the
run folder's lock to itself.

The runner passes its lock to each kernel (the folder stays locked while the kernel lives), and an
inherited descriptor is inherited again by whatever the kernel starts with ``fork``/``exec``
(``os.system``, ``subprocess`` with ``close_fds=False``): a background process the code under test leaves
would hold the lock after the run. Here the descriptors named in :data:`LOCK_FDS_ENV` are made
non-inheritable before ipykernel starts.
"""

from __future__ import annotations

import os
import runpy

LOCK_FDS_ENV = "REPRO_KERNEL_LOCK_FDS"


def main() -> None:
    for fd in filter(None, os.environ.pop(LOCK_FDS_ENV, "").split(",")):
        try:
            os.set_inheritable(int(fd), False)
        except (OSError, ValueError):
            pass
    runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
