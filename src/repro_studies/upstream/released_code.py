"""Run single definitions of a release's source: a function, a method, a class, an expression.

The decisions a study asks about (which attention class a platform gets, which record a cache stores)
sit in modules far too large to import without vLLM's dependencies. :class:`ReleasedCode` compiles only
the definition that decides, from the release's own file and at its own line numbers (a traceback names
the wheel's file), and gives it the names it reads, on first use:

- a stand-in the study supplies for a fully qualified name (``vllm.platforms.current_platform``);
- another top-level definition of the release, resolved the same way (functions, constants, classes,
  ``from ... import`` chains through package ``__init__`` files);
- anything else is :class:`Missing`, which raises :class:`NotProvided` naming it when called or tested,
  so a path the study did not provide for ends as a row that says what was missing, never as a guess.

Classes whose bases are plain Python classes are executed as released; any other class is a
:class:`ClassRef`, whose attributes (methods, class attributes, properties of an instance made with
:meth:`ClassRef.instance`) are compiled from the class body on demand, following its bases.
Top-level functions are compiled without their decorators (caches and registrations do not decide).
"""

from __future__ import annotations

import ast
import builtins
import copy
import importlib
import linecache
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar


class ImportFailure:
    """A stand-in for a module whose import fails on the platform studied (the error it raises)."""

    def __init__(self, error: ImportError):
        self.error = error

    def __repr__(self) -> str:
        return f"<import fails: {self.error}>"


def _unless_failure(standin: Any) -> Any:
    if isinstance(standin, ImportFailure):
        raise standin.error
    return standin


class _Cycle(RuntimeError):
    """A name whose definition is guarded by a test that reads the name itself."""


class StatementFailed(RuntimeError):
    """A released statement raised; the message names where and the error."""


class NotProvided(RuntimeError):
    """A released definition used a name the study neither provided nor could compile."""


class Missing:
    """A name a released definition imports but the study does not provide; harmless until used."""

    _made: ClassVar[dict[str, Missing]] = {}

    def __new__(cls, qualified: str) -> Missing:
        if qualified not in cls._made:
            obj = super().__new__(cls)
            obj.qualified = qualified
            cls._made[qualified] = obj
        return cls._made[qualified]

    def __getattr__(self, name: str) -> Missing:
        if name.startswith("__"):
            raise AttributeError(name)
        return Missing(f"{self.qualified}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotProvided(f"{self.qualified} was called but is not provided to the released code")

    def __bool__(self) -> bool:
        raise NotProvided(f"{self.qualified} was tested but is not provided to the released code")

    def __getitem__(self, item: Any) -> Missing:
        return self

    def __contains__(self, item: Any) -> bool:  # without it, ``x in missing`` iterates __getitem__ forever
        raise NotProvided(f"{self.qualified} was searched but is not provided to the released code")

    def __iter__(self) -> Any:
        raise NotProvided(f"{self.qualified} was iterated but is not provided to the released code")

    def __repr__(self) -> str:
        return f"<missing {self.qualified}>"

    def __instancecheck__(self, obj: Any) -> bool:
        return False  # nothing the study makes is an instance of a class it does not provide

    def __subclasscheck__(self, cls: Any) -> bool:
        return False


def _module_of(member: str) -> str:
    name = member[:-3].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


@dataclass(frozen=True)
class Location:
    """Where a released definition lives: ``vllm/a/b.py:Name`` line N."""

    member: str
    qualname: str
    lineno: int

    def __str__(self) -> str:
        return f"{self.member}:{self.qualname} (line {self.lineno})"


class ClassRef:
    """A released class, read lazily: attribute access compiles the attribute from the class body."""

    def __init__(self, code: ReleasedCode, member: str, node: ast.ClassDef):
        self._code, self._member, self._node = code, member, node
        self.__name__ = self.__qualname__ = node.name
        self.__module__ = _module_of(member)
        self.location = Location(member, node.name, node.lineno)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Released code constructing this class: the study's :attr:`ReleasedCode.constructor` builds the
        object (a released ``__init__`` cannot run whole); without one, calling it is not provided."""
        if self._code.constructor is None:
            raise NotProvided(f"{self.location} was constructed but no constructor is provided to the released code")
        return self._code.constructor(self, args, kwargs)

    def __repr__(self) -> str:
        return f"<released class {self.__name__} of {self._member}>"

    def bases(self) -> list[Any]:
        return [self._code.evaluate(self._member, ast.unparse(b)) for b in self._node.bases]

    def own(self, name: str) -> ast.AST | None:
        """The statement of the class body that defines ``name`` (last one wins), if any."""
        found = None
        for stmt in self._node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                found = stmt
            elif isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
                found = stmt
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
                found = stmt if stmt.value is not None else found
        return found

    def lookup(self, name: str) -> tuple[ClassRef | type, ast.AST | None]:
        """(owner, statement) for ``name`` along the bases, depth first as Python's MRO for single bases."""
        if self.own(name) is not None:
            return self, self.own(name)
        for base in self.bases():
            if isinstance(base, ClassRef):
                owner, stmt = base.lookup(name)
                if stmt is not None or not isinstance(owner, ClassRef):
                    return owner, stmt
            elif isinstance(base, type) and hasattr(base, name):
                return base, None
        return self, None

    def lineage(self) -> list[ClassRef]:
        """This class and its released bases, depth first (plain Python bases left out)."""
        seen: list[ClassRef] = []

        def walk(c: Any) -> None:
            if isinstance(c, ClassRef) and c not in seen:
                seen.append(c)
                for b in c.bases():
                    walk(b)

        walk(self)
        return seen

    def defines(self, name: str) -> bool:
        owner, stmt = self.lookup(name)
        return stmt is not None or not isinstance(owner, ClassRef)

    def mro_names(self) -> list[str]:
        names = [self.__name__]
        for base in self.bases():
            names += base.mro_names() if isinstance(base, ClassRef) else [getattr(base, "__name__", repr(base))]
        return names

    def is_subclass_of(self, name: str) -> bool:
        return name in self.mro_names()

    def _attribute(self, name: str, instance: ReleasedObject | None) -> Any:
        owner, stmt = self.lookup(name)
        if stmt is None:
            if not isinstance(owner, ClassRef) and hasattr(owner, name):
                return getattr(owner, name)
            raise AttributeError(f"released class {self.__name__} has no attribute {name!r}")
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            return owner._code.evaluate(owner._member, ast.unparse(stmt.value))
        decorators = {ast.unparse(d) for d in stmt.decorator_list}
        fn = owner._code.compile_function(owner._member, stmt, qualname=f"{owner.__name__}.{name}")
        if "property" in decorators or "cached_property" in decorators or "functools.cached_property" in decorators:
            if instance is None:
                return fn
            return fn(instance)
        if "classmethod" in decorators:
            return types.MethodType(fn, self)
        if "staticmethod" in decorators or instance is None:
            return fn
        return types.MethodType(fn, instance)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name.startswith("_code") or name in ("_member", "_node"):
            raise AttributeError(name)
        return self._attribute(name, None)

    def __instancecheck__(self, obj: Any) -> bool:
        if isinstance(obj, ReleasedObject):
            return object.__getattribute__(obj, "_cls").is_subclass_of(self.__name__)
        return False

    def __subclasscheck__(self, cls: Any) -> bool:
        return isinstance(cls, ClassRef) and cls.is_subclass_of(self.__name__)

    def instance(self, **attrs: Any) -> ReleasedObject:
        """An object of this class without running ``__init__``: ``attrs`` are its instance attributes."""
        return ReleasedObject(self, attrs)


class ReleasedObject:
    """An instance of a :class:`ClassRef`: its own attributes first, then the released class's."""

    def __init__(self, cls: ClassRef, attrs: Mapping[str, Any]):
        object.__setattr__(self, "_cls", cls)
        object.__setattr__(self, "_attrs", dict(attrs))

    def __getattr__(self, name: str) -> Any:
        attrs = object.__getattribute__(self, "_attrs")
        if name in attrs:
            return attrs[name]
        if name.startswith("__"):
            raise AttributeError(name)
        return object.__getattribute__(self, "_cls")._attribute(name, self)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__getattribute__(self, "_attrs")[name] = value

    def __repr__(self) -> str:
        return f"<released {object.__getattribute__(self, '_cls').__name__} object>"


class _Globals(dict):
    """A definition's globals: names resolved through :class:`ReleasedCode` on first read."""

    def __init__(self, code: ReleasedCode, member: str):
        hooked = {**vars(builtins), "__import__": code._import_hook(member)}
        super().__init__(__name__=_module_of(member), __builtins__=hooked)
        self._code, self._member = code, member

    def __missing__(self, key: str) -> Any:
        if hasattr(builtins, key) or key.startswith("__"):
            raise KeyError(key)
        value = self._code.value(self._member, key)
        self[key] = value
        return value


class _Locals(dict):
    """Local names of a top-level expression or statement; a name not among them resolves like a global
    (module-level code reads names with a plain dictionary lookup of the globals, which would skip
    :meth:`_Globals.__missing__`)."""

    def __init__(self, globals_: _Globals, local: Mapping[str, Any]):
        super().__init__(local)
        self._globals = globals_

    def __missing__(self, key: str) -> Any:
        return self._globals[key]


class _ImportsToLookups(ast.NodeTransformer):
    """``from vllm.x import y`` inside a function body becomes a lookup through the study's resolver."""

    def __init__(self, code: ReleasedCode, member: str):
        self.code, self.member = code, member

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST:
        module = self.code.absolute_module(self.member, node)
        if module.split(".")[0] != "vllm":
            return node
        assigns = [
            ast.Assign(
                targets=[ast.Name(id=alias.asname or alias.name, ctx=ast.Store())],
                value=ast.Call(
                    func=ast.Name(id="__released_import__", ctx=ast.Load()),
                    args=[ast.Constant(module), ast.Constant(alias.name)],
                    keywords=[],
                ),
            )
            for alias in node.names
        ]
        for a in assigns:
            ast.copy_location(a, node)
            ast.fix_missing_locations(a)
        return assigns


class ReleasedCode:
    """One release's sources, and the resolver that lets single definitions of them run."""

    def __init__(
        self,
        read: Callable[[str], str],
        members: Iterable[str],
        standins: Mapping[str, Any] | None = None,
        label: str = "",
        parsed: dict[str, ast.Module] | None = None,
    ):
        self._read = read
        self.members = frozenset(members)
        self.standins = dict(standins or {})
        self.label = label
        #: sources, parsed trees and compiled modules, shareable between studies of one release (never modified)
        self._trees: dict[str, Any] = parsed if parsed is not None else {}
        self._values: dict[tuple[str, str], Any] = {}
        self._globals: dict[str, _Globals] = {}
        self.used_standins: set[str] = set()
        self.missing_used: set[str] = set()
        self._modules: dict[str, dict[str, Any] | None] = {}
        self._in_progress: dict[str, dict[str, Any]] = {}
        self._raises: dict[str, BaseException] = {}
        self._resolving: set[tuple[str, str]] = set()
        self._module_objects: dict[str, types.ModuleType] = {}
        self._prefix = f"_repro_released_{id(self):x}"
        #: member -> why its top level could not run whole (its definitions then run one by one)
        self.not_executed: dict[str, str] = {}
        #: ``constructor(cls, args, kwargs)``: what calling a :class:`ClassRef` gives (None: not provided)
        self.constructor: Callable[[ClassRef, tuple, dict], Any] | None = None

    # ---- sources -------------------------------------------------------------------------------------------
    def member_of(self, module: str) -> str | None:
        base = module.replace(".", "/")
        for candidate in (f"{base}.py", f"{base}/__init__.py"):
            if candidate in self.members:
                return candidate
        return None

    def is_package(self, module: str) -> bool:
        prefix = module.replace(".", "/") + "/"
        return any(m.startswith(prefix) for m in self.members)

    def source(self, member: str) -> str:
        key = f"source:{member}"
        if key not in self._trees:
            self._trees[key] = self._read(member)  # type: ignore[assignment]
        return self._trees[key]  # type: ignore[return-value]

    def tree(self, member: str) -> ast.Module:
        if member not in self._trees:
            self._trees[member] = ast.parse(self.source(member), filename=member)
        return self._trees[member]

    def absolute_module(self, member: str, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        parts = _module_of(member).split(".")
        package = parts if member.endswith("/__init__.py") else parts[:-1]
        package = package[: len(package) - (node.level - 1)]
        return ".".join(package + ([node.module] if node.module else []))

    def toplevel(self, member: str, name: str) -> ast.AST | None:
        """The top-level statement binding ``name`` in ``member`` (outside ``if TYPE_CHECKING``), if any."""
        found = None

        def scan(body: list[ast.stmt], typing_only: bool) -> None:
            nonlocal found
            for stmt in body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name == name:
                    found = stmt
                elif isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == name for t in stmt.targets
                ):
                    found = stmt
                elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
                    found = stmt if stmt.value is not None else found
                elif isinstance(stmt, (ast.ImportFrom, ast.Import)) and not typing_only:
                    if any((a.asname or a.name.split(".")[0]) == name for a in stmt.names):
                        found = stmt
                elif isinstance(stmt, ast.If):
                    guard = ast.unparse(stmt.test)
                    if guard in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                        scan(stmt.orelse, typing_only)
                        continue
                    taken = self._test(member, stmt.test)
                    if taken is None:  # undecidable here: a definition in either branch will do
                        scan(stmt.body, typing_only)
                        scan(stmt.orelse, typing_only)
                    else:
                        scan(stmt.body if taken else stmt.orelse, typing_only)
                elif isinstance(stmt, ast.Try):
                    scan(stmt.body, typing_only)

        scan(self.tree(member).body, False)
        return found

    def _test(self, member: str, test: ast.expr) -> bool | None:
        try:
            return bool(self.evaluate(member, ast.unparse(test)))
        except Exception:  # a guard the study cannot evaluate
            return None

    def location(self, member: str, name: str) -> Location | None:
        node = self.toplevel(member, name)
        return Location(member, name, node.lineno) if node is not None else None

    # ---- resolution ----------------------------------------------------------------------------------------
    def imported(self, module: str, name: str) -> Any:
        """What ``from module import name`` gives the released code."""
        qualified = f"{module}.{name}"
        if qualified in self.standins:
            self.used_standins.add(qualified)
            return self.standins[qualified]
        if module in self.standins:
            self.used_standins.add(module)
            return getattr(self.standins[module], name)
        top = module.split(".")[0]
        if top in self.standins:
            self.used_standins.add(top)
            return getattr(self.standins[top], name) if module == top else Missing(qualified)
        if top != "vllm":
            try:
                return getattr(importlib.import_module(module), name)
            except (ImportError, AttributeError):
                self.missing_used.add(qualified)
                return Missing(qualified)
        member = self.member_of(module)
        if member is not None and self.toplevel(member, name) is not None:
            return self.value(member, name)
        submodule = f"{module}.{name}"
        if self.member_of(submodule) or self.is_package(submodule):
            return self.module(submodule)
        if member is not None:
            namespace = self.module_namespace(member)
            if namespace is not None and name in namespace:
                return namespace[name]
        self.missing_used.add(qualified)
        return Missing(qualified)

    def module(self, name: str) -> Any:
        """The released module ``name``: the module object when its top level runs whole, else a
        :class:`ModuleRef` resolving its names one by one."""
        member = self.member_of(name)
        if member is not None and self.module_namespace(member) is not None:
            return self._module_objects[member]
        return ModuleRef(self, name)

    def module_namespace(self, member: str) -> dict[str, Any] | None:
        """The module's namespace after running its whole top level as released (imports resolved by the
        study), or None when that raised (the reason is in :attr:`not_executed`)."""
        if member in self._raises:
            raise self._raises[member]
        if member in self._modules:
            return self._modules[member]
        if member in self._in_progress:
            return None
        # A real module object, registered under a name private to this study (dataclasses and typing look
        # classes' modules up in sys.modules); relative imports still see the release's package.
        module = types.ModuleType(f"{self._prefix}.{_module_of(member)}")
        sys.modules[module.__name__] = module
        namespace = module.__dict__
        namespace.update(
            __file__=self.filename(member),
            __package__=_module_of(member)
            if member.endswith("/__init__.py")
            else _module_of(member).rpartition(".")[0],
            __builtins__={**vars(builtins), "__import__": self._import_hook(member)},
        )
        self._in_progress[member] = namespace
        self._register_source(member)
        try:
            exec(self._compiled(member), namespace)
        except BaseException as exc:  # any failure means: run its definitions one by one
            if isinstance(exc, KeyboardInterrupt):
                raise
            if self._platform_failure(exc):
                self._modules[member] = None
                self.not_executed[member] = f"{type(exc).__name__}: {exc}"
                self._raises[member] = exc
                raise
            self.not_executed[member] = f"{type(exc).__name__}: {exc}"
            result = None
        else:
            result = namespace
            self._module_objects[member] = module
            prefix = _module_of(member) + "."
            for key, standin in self.standins.items():
                if key.startswith(prefix) and "." not in key[len(prefix) :]:
                    namespace[key[len(prefix) :]] = standin
                    self.used_standins.add(key)
            for name, source in self._import_sources(member).items():  # a name imported from a stand-in
                if source in self.standins and namespace.get(name) is not self.standins[source]:
                    namespace[name] = self.standins[source]
                    self.used_standins.add(source)
        finally:
            del self._in_progress[member]
        self._modules[member] = result
        return result

    def _platform_failure(self, exc: BaseException) -> bool:
        """Did ``exc`` come from a module the platform cannot import (an :class:`ImportFailure` stand-in)?
        Such a failure is the platform's behaviour and propagates to the importer, as it would in vLLM."""
        errors = {id(s.error) for s in self.standins.values() if isinstance(s, ImportFailure)}
        while exc is not None:
            if id(exc) in errors:
                return True
            exc = exc.__cause__ or exc.__context__
        return False

    def _import_hook(self, member: str) -> Callable[..., Any]:
        def hook(name: str, globals_: Any = None, locals_: Any = None, fromlist: Any = (), level: int = 0) -> Any:
            if level:
                package = (globals_ or {}).get("__package__") or ""
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (level - 1)])
                name = f"{base}.{name}" if name else base
            top = name.split(".")[0]
            if top != "vllm":
                if top in self.standins:
                    self.used_standins.add(top)
                    found = _unless_failure(self.standins[top])
                    if fromlist:
                        for part in name.split(".")[1:]:
                            found = getattr(found, part)
                    return found
                return importlib.__import__(name, globals_, locals_, fromlist, 0)
            if name in self.standins:
                self.used_standins.add(name)
                standin = _unless_failure(self.standins[name])
                return standin if fromlist else ModuleRef(self, "vllm")
            if not (self.member_of(name) or self.is_package(name)) and name.split(".")[1].startswith("_"):
                # a compiled extension the study does not provide: its import fails, as on a machine without it
                raise ImportError(f"No module named {name!r}")
            return self.module(name) if fromlist else ModuleRef(self, "vllm")

        return hook

    def value(self, member: str, name: str) -> Any:
        """The value of top-level ``name`` in ``member``, compiled from the release's source on first use."""
        key = (member, name)
        if key in self._values:
            return self._values[key]
        # A stand-in wins, even over a module that already ran whole: one for this name, or for where the
        # module imports it from.
        for qualified in (f"{_module_of(member)}.{name}", self._import_sources(member).get(name)):
            if qualified in self.standins:
                self.used_standins.add(qualified)
                self._values[key] = self.standins[qualified]
                return self._values[key]
        partial = self._in_progress.get(member)
        if partial is not None and name in partial:
            return partial[name]
        namespace = self.module_namespace(member) if member not in self._in_progress else None
        if namespace is not None and name in namespace:
            self._values[key] = namespace[name]
            return namespace[name]
        if key in self._resolving:
            raise _Cycle(f"{member}:{name} depends on itself")
        self._resolving.add(key)
        try:
            return self._value_by_definition(member, name, key)
        finally:
            self._resolving.discard(key)

    def _value_by_definition(self, member: str, name: str, key: tuple[str, str]) -> Any:
        qualified = f"{_module_of(member)}.{name}"
        if qualified in self.standins:
            self.used_standins.add(qualified)
            self._values[key] = self.standins[qualified]
            return self._values[key]
        node = self.toplevel(member, name)
        if node is None:
            if hasattr(builtins, name):
                return getattr(builtins, name)
            if name == "TYPE_CHECKING":
                return False
            self.missing_used.add(qualified)
            result: Any = Missing(qualified)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            try:
                result = self.compile_function(member, node, qualname=name, keep_decorators=True)
            except Exception:  # a decorator the study cannot apply: the plain function
                result = self.compile_function(member, node, qualname=name, keep_decorators=False)
        elif isinstance(node, ast.ClassDef):
            result = self._class(member, node)
        elif isinstance(node, ast.ImportFrom):
            alias = next(a for a in node.names if (a.asname or a.name) == name)
            result = self.imported(self.absolute_module(member, node), alias.name)
        elif isinstance(node, ast.Import):
            alias = next(a for a in node.names if (a.asname or a.name.split(".")[0]) == name)
            top = alias.name if alias.asname else alias.name.split(".")[0]
            if top in self.standins:
                self.used_standins.add(top)
                result = self.standins[top]
            elif top.split(".")[0] != "vllm":
                try:
                    result = importlib.import_module(top)
                except ImportError:
                    result = Missing(top)
            else:
                result = ModuleRef(self, top)
        else:
            value_node = node.value
            result = self.evaluate(member, ast.unparse(value_node))
        self._values[key] = result
        return result

    def _import_sources(self, member: str) -> dict[str, str]:
        """``{name: "module.name"}`` for every ``from module import name`` of ``member``'s top level (read, not
        run: every branch of an ``if`` counts)."""
        key = f"imports:{member}"
        if key not in self._trees:
            found: dict[str, str] = {}
            if member in self.members:
                for stmt in toplevel_statements(self.tree(member).body):
                    if isinstance(stmt, ast.ImportFrom):
                        module = self.absolute_module(member, stmt)
                        found.update({a.asname or a.name: f"{module}.{a.name}" for a in stmt.names})
            self._trees[key] = found  # type: ignore[assignment]
        return self._trees[key]  # type: ignore[return-value]

    def globals_of(self, member: str) -> _Globals:
        if member not in self._globals:
            g = _Globals(self, member)
            g["__released_import__"] = self.imported
            self._globals[member] = g
        return self._globals[member]

    def evaluate(self, member: str, expression: str, local: Mapping[str, Any] | None = None) -> Any:
        """``expression`` evaluated as if written at the top of ``member`` (``local`` names first)."""
        code = compile(expression, f"{member} [expression]", "eval")
        g = self.globals_of(member)
        return eval(code, g, _Locals(g, local or {}))

    def execute(self, member: str, statement: ast.stmt, local: dict[str, Any]) -> dict[str, Any]:
        """Run one released statement with ``local`` as its local names (updated in place)."""
        where = (statement.lineno, statement.col_offset, statement.end_lineno, statement.end_col_offset)
        key = f"exec:{self.filename(member)}:{where}"
        if key not in self._trees:  # compiled once per statement (shared with every study of the release)
            visited = _ImportsToLookups(self, member).visit(_copy(statement))
            module = ast.Module(body=visited if isinstance(visited, list) else [visited], type_ignores=[])
            ast.fix_missing_locations(module)
            self._trees[key] = compile(module, self.filename(member), "exec")  # type: ignore[assignment]
        compiled = self._trees[key]
        g = self.globals_of(member)
        # One namespace for the statement's globals and locals, so that a comprehension or lambda in it (a
        # function scope of its own) sees the local names too; names not among them resolve like globals.
        scope = _Locals(g, {**local, "__builtins__": g["__builtins__"], "__name__": g["__name__"]})
        exec(compiled, scope)
        local.update({k: v for k, v in scope.items() if k not in ("__builtins__", "__name__")})
        return local

    def _compiled(self, member: str) -> types.CodeType:
        key = f"code:{self.filename(member)}"
        if key not in self._trees:
            self._trees[key] = compile(self.source(member), self.filename(member), "exec")  # type: ignore[assignment]
        return self._trees[key]  # type: ignore[return-value]

    def _register_source(self, member: str) -> None:
        """Let ``inspect.getsource`` (Triton's ``@jit`` reads its kernel's text) find the released file."""
        text = self.source(member)
        name = self.filename(member)
        linecache.cache[name] = (len(text), None, text.splitlines(keepends=True), name)

    def execute_all(self, member: str, statements: Iterable[ast.stmt], local: dict[str, Any], where: str) -> None:
        """Run released statements in order; the first that raises is a :class:`StatementFailed` naming
        ``where`` (e.g. ``Class.method``) and its line."""
        for stmt in statements:
            try:
                self.execute(member, stmt, local)
            except Exception as exc:
                raise StatementFailed(f"{member}:{where} line {stmt.lineno}: {type(exc).__name__}: {exc}") from exc

    def filename(self, member: str) -> str:
        return f"{self.label}/{member}" if self.label else member

    def compile_function(
        self, member: str, node: ast.FunctionDef, qualname: str, keep_decorators: bool = False
    ) -> Callable[..., Any]:
        """The released function ``node`` as a Python function whose globals resolve lazily."""
        fn_node = _ImportsToLookups(self, member).visit(_copy(node))
        if not keep_decorators:
            fn_node.decorator_list = []
        for arg in [*fn_node.args.posonlyargs, *fn_node.args.args, *fn_node.args.kwonlyargs]:
            arg.annotation = None
        for arg in (fn_node.args.vararg, fn_node.args.kwarg):
            if arg is not None:
                arg.annotation = None
        fn_node.returns = None
        module = ast.Module(body=[fn_node], type_ignores=[])
        ast.fix_missing_locations(module)
        self._register_source(member)
        namespace: dict[str, Any] = {}
        exec(compile(module, self.filename(member), "exec"), self.globals_of(member), namespace)
        fn = namespace[node.name]
        fn.__qualname__ = qualname
        fn.released_location = Location(member, qualname, node.lineno)
        return fn

    def _class(self, member: str, node: ast.ClassDef) -> Any:
        bases = [self.evaluate(member, ast.unparse(b)) for b in node.bases]
        plain = all(
            (isinstance(b, type) or getattr(b, "__module__", "") == "typing")
            and getattr(b, "__module__", "").split(".")[0] != "vllm"
            for b in bases
        )
        if plain and not node.keywords:
            try:
                _resolve_class_level_names(self.globals_of(member), node)
                namespace: dict[str, Any] = {}
                cls_node = _ImportsToLookups(self, member).visit(_copy(node))
                module = ast.Module(body=[cls_node], type_ignores=[])
                ast.fix_missing_locations(module)
                exec(compile(module, self.filename(member), "exec"), self.globals_of(member), namespace)
                return namespace[node.name]
            except Exception:
                pass
        return ClassRef(self, member, node)

    # ---- helpers for studies -------------------------------------------------------------------------------
    def class_ref(self, member: str, name: str) -> ClassRef:
        """The released class ``name`` of ``member`` read from its body (never a stand-in, never executed)."""
        node = self.toplevel(member, name)
        if not isinstance(node, ast.ClassDef):
            raise NotProvided(f"{member} defines no class {name}")
        return ClassRef(self, member, node)

    def function(self, member: str, qualname: str) -> Callable[..., Any]:
        """A released top-level function, or ``Class.method`` as an unbound function."""
        if "." in qualname:
            cls_name, attr = qualname.split(".", 1)
            cls = self.value(member, cls_name)
            return getattr(cls, attr)
        return self.value(member, qualname)

    def taken_imports(self, member: str) -> list[tuple[str, str]]:
        """``(module, name)`` of every ``from ... import`` a module's top level runs: ``if`` tests are
        evaluated as released (with the study's stand-ins), only the taken branch counts."""
        found: list[tuple[str, str]] = []

        def walk(body: list[ast.stmt]) -> None:
            for stmt in body:
                if isinstance(stmt, ast.ImportFrom):
                    module = self.absolute_module(member, stmt)
                    found.extend((module, a.name) for a in stmt.names)
                elif isinstance(stmt, ast.If):
                    walk(stmt.body if self.evaluate(member, ast.unparse(stmt.test)) else stmt.orelse)

        walk(self.tree(member).body)
        return found


class ModuleRef:
    """A released module, for ``import vllm.x`` or ``from vllm import x``: attributes resolve as top-level names."""

    def __init__(self, code: ReleasedCode, module: str):
        self._code, self._module = code, module

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._code.imported(self._module, name)

    def __repr__(self) -> str:
        return f"<released module {self._module}>"


def _resolve_class_level_names(g: _Globals, node: ast.ClassDef) -> None:
    """A class body reads module names with a plain dictionary lookup: resolve them into the globals first."""

    def names(n: ast.AST) -> Iterable[str]:
        for child in ast.iter_child_nodes(n):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for d in child.decorator_list + child.args.defaults + child.args.kw_defaults:
                    if d is not None:
                        yield from (x.id for x in ast.walk(d) if isinstance(x, ast.Name))
                continue
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
                yield child.id
            yield from names(child)

    for name in set(names(node)):
        try:
            g[name]
        except KeyError:
            pass


def toplevel_statements(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    """The statements of a module's top level, those inside ``if`` and ``try`` blocks included."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            yield from toplevel_statements(stmt.body)
            yield from toplevel_statements(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from toplevel_statements(stmt.body)
            yield from toplevel_statements(stmt.orelse)
            yield from toplevel_statements(stmt.finalbody)


def _copy(node: ast.AST) -> Any:
    return copy.deepcopy(node)


# ---- backward slices of a released method --------------------------------------------------------------------
def _defined(stmt: ast.stmt) -> set[str]:
    """Names a statement binds: plain names, ``self.<attr>``, and lists it appends to."""
    out: set[str] = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                out.add(f"self.{node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("append", "extend")
            and isinstance(node.func.value, ast.Name)
        ):
            out.add(node.func.value.id)
    return out


def _used(stmt: ast.stmt) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            out.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                out.add(f"self.{node.attr}")
    return out


def backward_slice(body: list[ast.stmt], target: ast.stmt, given: Iterable[str] = ()) -> list[ast.stmt]:
    """The statements of ``body`` before ``target`` that ``target`` depends on (by the names they bind),
    followed by ``target``: what runs to reproduce ``target``'s effect without the rest of the method.
    Names in ``given`` are supplied by the study: statements binding only those are left out."""
    given = set(given)
    index = body.index(target)
    needed = _used(target) - given
    chosen = [target]
    for stmt in reversed(body[:index]):
        if _defined(stmt) & needed:
            chosen.append(stmt)
            needed |= _used(stmt) - given
    return list(reversed(chosen))


def statement_binding(body: list[ast.stmt], name: str) -> ast.stmt | None:
    """The last top-level statement of ``body`` that binds ``name`` (``self.x`` for an attribute)."""
    found = None
    for stmt in body:
        if name in _defined(stmt):
            found = stmt
    return found


class ReleasedDefaults:
    """A configuration object of the release (``CacheConfig``, ``ParallelConfig``, ...) at its defaults:
    a field the study does not set reads the default written in the release's class body (``x: T = v``,
    ``field(default=v)``, ``Field(default=v)``, ``default_factory=f`` called)."""

    def __init__(self, code: ReleasedCode, member: str, class_name: str, **overrides: Any):
        object.__setattr__(self, "_code", code)
        object.__setattr__(self, "_where", (member, class_name))
        object.__setattr__(self, "_values", dict(overrides))

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        if name.startswith("__"):
            raise AttributeError(name)
        code = object.__getattribute__(self, "_code")
        member, class_name = object.__getattribute__(self, "_where")
        node = code.toplevel(member, class_name) if member in code.members else None
        if not isinstance(node, ast.ClassDef):
            raise AttributeError(f"{class_name} is not in this release's {member}")
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
                if stmt.value is None:
                    break
                value = released_field_default(stmt.value)
                if value is None:
                    break
                result = code.evaluate(member, ast.unparse(value[1]))
                values[name] = result() if value[0] == "factory" else result
                return values[name]
        raise AttributeError(f"{member}:{class_name} declares no default for {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        object.__getattribute__(self, "_values")[name] = value


def released_field_default(value: ast.expr) -> tuple[str, ast.expr] | None:
    if isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] in ("field", "Field"):
        for kw in value.keywords:
            if kw.arg == "default":
                return ("value", kw.value)
            if kw.arg == "default_factory":
                return ("factory", kw.value)
        if value.args:
            return ("value", value.args[0])
        return None
    return ("value", value)
