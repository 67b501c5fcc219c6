"""One writer per run folder: an advisory lock (``fcntl.flock`` on ``<run>/.repro.lock``).

``run`` and ``report`` hold it exclusively for their whole life (the report step included), and pass
it to every notebook kernel they start, so the lock is free only when no process of the run is left.
The kernel releases a lock when its holders die, so a run killed with ``kill -9`` leaves no stale
lock: ``--resume`` takes the folder over as soon as the last process of the killed run has gone.
A reader (the other run of ``report --against``) takes it shared. A second writer is refused with
one line (exit code 2), never queued.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import tempfile
from pathlib import Path

LOCK_NAME = ".repro.lock"


class RunFolderError(ValueError):
    """The run folder cannot be used as asked; one line, exit code 2."""


class RunLock:
    """``flock`` on ``<folder>/.repro.lock``; exclusive for writers, shared for readers."""

    def __init__(self, folder: Path, role: str, exclusive: bool = True):
        self.folder, self.role, self.exclusive = Path(folder), role, exclusive
        self.fd: int | None = None

    @property
    def path(self) -> Path:
        return self.folder / LOCK_NAME

    def acquire(self, option: str) -> RunLock:
        """Take the lock or raise :class:`RunFolderError` naming who holds it; ``option`` names the argument."""
        flags = os.O_CLOEXEC | (os.O_RDWR | os.O_CREAT if self.exclusive else os.O_RDONLY)
        existed = os.path.lexists(self.path)
        try:
            fd = os.open(self.path, flags, 0o644)
        except FileNotFoundError:  # a reader of a folder no locking writer ever touched
            return self
        except OSError as exc:
            raise RunFolderError(
                f"{option}: cannot write to {self.folder} ({exc.strerror or exc}); accepted: a writable folder"
            ) from None
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe_holder(fd)
            os.close(fd)
            raise RunFolderError(
                f"{option}: {self.folder} is in use by another process{holder}; accepted: wait "
                "for it to end, or another folder"
            ) from None
        if self.exclusive:
            holder = {
                "pid": os.getpid(),
                "role": self.role,
                "since": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            }
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
            except OSError as exc:  # a full disk, a quota, a file that cannot hold it: nothing is left behind
                os.close(fd)
                if not existed:
                    self.path.unlink(missing_ok=True)
                raise RunFolderError(
                    f"{option}: cannot write to {self.folder} ({exc.strerror or exc}); accepted: a writable folder "
                    "with room for the run"
                ) from None
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def holder_if_locked(folder: Path) -> str | None:
    """Who holds ``folder``'s lock (``""`` if unknown), or None when it is free; creates nothing."""
    try:
        fd = os.open(folder / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return _describe_holder(fd)
    finally:
        os.close(fd)
    return None


def _describe_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
        return f" (repro {info['role']}, pid {int(info['pid'])}, since {info['since']})"
    except (ValueError, KeyError, TypeError, OSError):
        return ""


def new_default_folder(parent: Path, stamp: str) -> Path:
    """``parent/stamp``, or ``stamp-2``, ``stamp-3``... so two runs started in one second never share one."""
    try:
        parent.mkdir(parents=True, exist_ok=True)
        for n in range(1, 1000):
            candidate = parent / (stamp if n == 1 else f"{stamp}-{n}")
            try:
                candidate.mkdir()
                return candidate
            except FileExistsError:
                continue
    except OSError as exc:
        raise RunFolderError(
            f"--out: cannot create a run folder in {parent} ({exc.strerror or exc}); accepted: an explicit --out"
        ) from None
    raise RunFolderError(f"--out: no free folder name for {parent / stamp}; accepted: an explicit --out")


#: Bytes a run's own paths take below its folder (``logs/sanitizer/`` and a file name as long as allowed).
ROOM_INSIDE = 16 + 255
#: The folders of a run folder a run or a report writes into.
WRITTEN_FOLDERS = ("logs", "notebooks", "results", "plots")


def check_room(run_dir: Path, option: str) -> None:
    """Refuse, before any work, a folder whose path leaves no room for the files a run writes in it: a name
    over the file system's limit, or a path too long for the run's own paths below it."""
    absolute = Path(os.path.abspath(run_dir))
    existing = Path(absolute.anchor)  # the deepest folder of the path that exists (a name too long is none)
    for p in (*reversed(absolute.parents), absolute):
        if not _is_dir(p):
            break
        existing = p
    try:
        name_max, path_max = os.pathconf(existing, "PC_NAME_MAX"), os.pathconf(existing, "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = 255, 4096
    for part in absolute.parts:
        if len(part.encode()) > name_max:
            raise RunFolderError(
                f"{option}: {run_dir}: the name {part[:24]!r}... is {len(part.encode())} bytes, over the file "
                f"system's limit of {name_max}; accepted: names of at most {name_max} bytes"
            )
    if len(str(absolute).encode()) + ROOM_INSIDE > path_max:
        raise RunFolderError(
            f"{option}: {run_dir}: a path of {len(str(absolute).encode())} bytes leaves no room for the run's "
            f"files below it (the file system allows {path_max} in all); accepted: a path of at most "
            f"{path_max - ROOM_INSIDE} bytes"
        )


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a name too long to look up
        return False


def check_writable(run_dir: Path, option: str, folders: tuple[str, ...] = WRITTEN_FOLDERS) -> None:
    """Refuse, before any work, a run folder (or one of its ``folders`` that exists) this process cannot write
    into: a file is created in each and removed."""
    for folder in (run_dir, *(run_dir / f for f in folders)):
        if not folder.is_dir():
            continue
        try:
            fd, probe = tempfile.mkstemp(prefix=".repro-probe-", dir=folder)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise RunFolderError(
                f"{option}: cannot write to {folder} ({exc.strerror or exc}); accepted: a run folder whose "
                f"folders ({', '.join(folders)}) this user can write"
            ) from None


def open_for_run(run_dir: Path, resume: bool) -> RunLock:
    """Create or take over ``run_dir`` for a run: the lock first, then what the folder holds is checked. A folder
    refused here is left as it was: the folders this call created are removed again."""
    check_room(run_dir, "--resume" if resume else "--out")
    if run_dir.exists() and not run_dir.is_dir():
        raise RunFolderError(f"--out: {run_dir} is a file; accepted: a new or empty folder")
    if resume and not run_dir.is_dir():
        raise RunFolderError(f"--resume: {run_dir} does not exist; accepted: the folder of an earlier run")
    if resume:
        check_writable(run_dir, "--resume")
    created = _missing_folders(run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _remove(created)
        raise RunFolderError(
            f"--out: cannot write to {run_dir} ({exc.strerror or exc}); accepted: a writable folder"
        ) from None
    try:
        _check_contents(run_dir, resume)  # before the lock file is created: a refused folder is left as it was
        lock = RunLock(run_dir, "run").acquire("--resume" if resume else "--out")
    except BaseException:
        _remove(created)
        raise
    try:
        _check_contents(run_dir, resume)  # again under the lock: another run may have started meanwhile
    except BaseException:
        lock.release()
        raise
    return lock


def _missing_folders(path: Path) -> list[Path]:
    """``path`` and each parent of it that does not exist yet, deepest first."""
    out = []
    for p in (path, *path.parents):
        if os.path.lexists(p):
            break
        out.append(p)
    return out


def _remove(folders: list[Path]) -> None:
    """Remove the folders a refused call created (deepest first; a lock file it left in the deepest)."""
    for folder in folders:
        try:
            (folder / LOCK_NAME).unlink(missing_ok=True)
            folder.rmdir()
        except OSError:
            return


def _check_contents(run_dir: Path, resume: bool) -> None:
    held = [p.name for p in run_dir.iterdir() if p.name != LOCK_NAME]
    if held and not resume:
        busy = holder_if_locked(run_dir)
        if busy is not None:
            raise RunFolderError(f"--out: {run_dir} is in use by another process{busy}; accepted: another folder")
        raise RunFolderError(
            f"--out: {run_dir} already holds a run; accepted: a new or empty folder, or --resume to finish that run"
        )
    if resume and not (run_dir / "manifest.json").is_file():
        raise RunFolderError(f"--resume: {run_dir} holds no manifest.json to resume")
