"""Import a release's own gather module from the wheel cache, as released or rewritten.

The module runs as ``vllm.<...>`` exactly as in the wheel, but only inside :meth:`LoadedRelease.active`:
there a finder serves the release's cached files (the member sets the study asked the cache for), the
stub table the study declares (default: the gather path's :data:`repro_studies.upstream.stubs.STUBS`), and
empty parent packages; anything else is a ``ModuleNotFoundError`` naming the module, which a study
reports as "could not load: <module>". Any ``vllm`` modules already imported are set aside and restored on exit,
so several releases (and an installed vLLM) can live in one process.

A rewritten source (the patcher's output) gets its own file name, registered with ``linecache`` so
Triton's ``inspect.getsource`` reads the rewritten text and its compile cache keys differ.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import linecache
import sys
import threading
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from repro_studies.registry import Form
from repro_studies.upstream.members import GATHER, HELPER_MODULES, HELPER_PACKAGES, MemberSet, resolve
from repro_studies.upstream.stubs import STUBS
from repro_studies.upstream.wheelcache import CacheEntry

_active_lock = threading.RLock()


def member_to_module(member: str) -> str:
    """``vllm/a/b.py`` -> ``vllm.a.b``; ``vllm/a/__init__.py`` -> ``vllm.a``."""
    name = member[:-3].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


class LoadError(RuntimeError):
    """The release's module could not be imported; the message says which import failed.

    ``missing`` names the module nobody provides when that was the cause ("" otherwise).
    """

    def __init__(self, message: str, missing: str = ""):
        super().__init__(message)
        self.missing = missing


@dataclass
class LoadedRelease:
    """A release's modules, importable only inside :meth:`active`.

    ``stubs``: module name -> stub source, the stand-ins this study declares (default: the gather path's);
    ``sets``: the member sets whose cached files it serves (default: the gather set), so what one study
    loads does not depend on what other studies put into the same cache entry.
    """

    entry: CacheEntry
    overrides: dict[str, str] = field(default_factory=dict)  # member -> rewritten source
    tag: str = Form.RELEASED
    stubs: Mapping[str, str] = field(default_factory=lambda: STUBS)
    sets: tuple[MemberSet | str, ...] = (GATHER,)
    modules: dict[str, types.ModuleType] = field(default_factory=dict)
    stubs_used: set[str] = field(default_factory=set)
    helpers_used: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        served = {m for s in resolve(self.sets) for m in self.entry.members_of(s)}
        self._files = {member_to_module(m): m for m in sorted(served)}

    def filename(self, member: str) -> str:
        real = str(self.entry.path_of(member))
        return real if member not in self.overrides else f"{real} [{self.tag}]"

    def source(self, member: str) -> str:
        return self.overrides.get(member) or self.entry.read(member)

    def serves(self, name: str) -> str:
        """What the finder does for ``name``: stub, file, package, or "" (not provided)."""
        if name in self.stubs:
            return "stub"
        if name in self._files:
            return "package-file" if self._files[name].endswith("/__init__.py") else "file"
        prefix = name + "."
        if any(k.startswith(prefix) for k in list(self._files) + list(self.stubs)):
            return "package"
        return ""

    @contextlib.contextmanager
    def active(self) -> Iterator[LoadedRelease]:
        """``vllm`` means this release inside the block (re-entrant, one release at a time)."""
        with _active_lock:
            if getattr(_active, "release", None) is self:
                yield self
                return
            saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k == "vllm" or k.startswith("vllm.")}
            sys.modules.update(self.modules)
            finder = _Finder(self)
            sys.meta_path.insert(0, finder)
            previous, _active.release = getattr(_active, "release", None), self
            try:
                yield self
            finally:
                _active.release = previous
                sys.meta_path.remove(finder)
                for k in [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]:
                    self.modules[k] = sys.modules.pop(k)
                sys.modules.update(saved)

    def import_module(self, member: str) -> types.ModuleType:
        """Import a cached member (e.g. ``vllm/models/.../cache_utils.py``); LoadError says why not."""
        if member not in self._files.values():
            raise LoadError(f"{member} is not in the cache of vLLM {self.entry.version}")
        with self.active():
            try:
                return importlib.import_module(member_to_module(member))
            except ModuleNotFoundError as exc:
                raise LoadError(
                    f"importing {member_to_module(member)} failed: {type(exc).__name__}: {exc}", missing=exc.name or ""
                ) from exc
            except Exception as exc:
                raise LoadError(f"importing {member_to_module(member)} failed: {type(exc).__name__}: {exc}") from exc

    def stub(self, name: str) -> types.ModuleType:
        """The stub module ``name`` of this release (to set a switch such as ``ROCM``)."""
        with self.active():
            return importlib.import_module(name)

    def provenance(self) -> dict:
        return {
            "release": self.entry.version,
            "wheel": self.entry.provenance.get("wheel"),
            "wheel_sha256": self.entry.provenance.get("sha256"),
            "variant": self.tag,
            "stubs": sorted(self.stubs_used),
            "helpers_as_released": sorted(self.helpers_used),
            "rewritten": sorted(self.overrides),
        }


class _Active(threading.local):
    release: LoadedRelease | None = None


_active = _Active()


class _Loader(importlib.abc.Loader):
    def __init__(self, release: LoadedRelease, kind: str):
        self.release, self.kind = release, kind

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        if self.kind == "package":
            module.__path__ = []
            return
        if self.kind == "stub":
            self.release.stubs_used.add(name)
            code = compile(self.release.stubs[name], f"<repro stub {name}>", "exec")
        else:
            member = self.release._files[name]
            if self.kind == "package-file":
                module.__path__ = []
            if member in HELPER_MODULES or member.startswith(HELPER_PACKAGES):
                self.release.helpers_used.add(member)
            text = self.release.source(member)
            filename = self.release.filename(member)
            module.__file__ = filename
            if member in self.release.overrides:
                lines = text.splitlines(keepends=True)
                linecache.cache[filename] = (len(text), None, lines, filename)
            code = compile(text, filename, "exec")
        exec(code, module.__dict__)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, release: LoadedRelease):
        self.release = release

    def find_spec(
        self, fullname: str, path: object = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "vllm" and not fullname.startswith("vllm."):
            return None
        kind = self.release.serves(fullname)
        if not kind:
            raise ModuleNotFoundError(
                f"{fullname} is neither in vLLM {self.release.entry.version}'s cache nor stubbed by the repro loader",
                name=fullname,
            )
        is_pkg = kind in ("package", "package-file")
        return importlib.util.spec_from_loader(fullname, _Loader(self.release, kind), is_package=is_pkg)
