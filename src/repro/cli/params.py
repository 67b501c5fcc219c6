"""``-p NAME=VALUE``: the value is read by the parameter's declared kind, never guessed.

YAML guessing turned ``off`` into ``False``, ``01000`` into 512 (octal) and ``4:16`` into 256
(base 60). Here an integer is decimal digits, a number is a decimal literal, a flag is ``true`` or
``false``, a string is the text as typed, and a list is ``[a, b]`` or ``a,b`` of those; anything
else is one line saying how to write it (exit code 2).
"""

from __future__ import annotations

import ast
import re
import shlex
from typing import Any

from repro.parameters import RESERVED, ParameterError, check_name, schema

INT = re.compile(r"[+-]?(0|[1-9][0-9]*)")
NUMBER = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
QUOTES = ("'", '"')


def kind_of(name: str) -> tuple[type, type | None]:
    """(kind, item kind) of a declared parameter, from its spec (:func:`repro.parameters.schema`)."""
    spec = schema()[name]
    return spec.kind, spec.item_kind


def format_value(value: Any) -> str:
    """The canonical ``-p`` text of a value; :func:`parse_value` reads it back unchanged."""
    if isinstance(value, list):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def example(name: str, value: Any) -> str:
    return "-p " + shlex.quote(f"{name}={format_value(value)}")


def _scalar(name: str, raw: str, kind: type, whole: str, how: str) -> Any:
    text = raw.strip()
    if kind is bool:
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ParameterError(f"{name}: {whole!r} is not true or false; write e.g. {how}")
    if kind is int:
        if INT.fullmatch(text):
            return int(text)
        if re.fullmatch(r"[+-]?0[0-9]+", text):
            raise ParameterError(
                f"{name}: {whole!r} has a leading zero (YAML would read it as octal); write "
                f"decimal digits without it, e.g. {how}"
            )
        raise ParameterError(f"{name}: {whole!r} is not a decimal integer; write digits only, e.g. {how}")
    if kind is float:
        if NUMBER.fullmatch(text):
            return float(text)
        raise ParameterError(f"{name}: {whole!r} is not a decimal number; write e.g. {how}")
    if len(text) >= 2 and text[0] == text[-1] and text[0] in QUOTES:
        raise ParameterError(f"{name}: {whole!r} keeps its quotes; the shell's quotes are enough, e.g. {how}")
    return text


def parse_value(name: str, raw: str, kind: type, item_kind: type | None, how: str) -> Any:
    """``raw`` as the declared ``kind``; :class:`ParameterError` with ``how`` (an example) otherwise."""
    if kind is not list:
        return _scalar(name, raw, kind, raw, how)
    text = raw.strip()
    if text.startswith("[") != text.endswith("]"):
        raise ParameterError(f"{name}: {raw!r} has an unclosed bracket; write e.g. {how}")
    inner = text[1:-1] if text.startswith("[") else text
    if not inner.strip():
        return []
    items = inner.split(",")
    out = []
    for item in items:
        if not item.strip() or any(c in item for c in "[]{}:"):
            raise ParameterError(f"{name}: {raw!r} is not a flat comma-separated list; write e.g. {how}")
        bare = item.strip()
        if item_kind is str and len(bare) >= 2 and bare[0] == bare[-1] and bare[0] in QUOTES:
            bare = bare[1:-1]  # JSON-style ["a", "b"]: the quotes are list syntax here
        out.append(_scalar(name, bare, item_kind or str, raw, how))
    return out


def parse_assignments(
    assignments: list[str],
    declared: dict[str, dict[str, str]],
    everywhere: dict[str, dict[str, str]] | None = None,
) -> dict[str, Any]:
    """Every ``-p`` in order, each name at most once, typed by its declared kind; the values are checked where each
    notebook's parameters are built (:class:`repro.parameters.Parameters`), not here.

    ``declared`` is ``{name: {notebook: default source}}`` from the selected notebooks' parameters cells;
    ``everywhere``, the same for every notebook (a name another notebook declares is named as such).
    """
    declared_by = {k: list(v) for k, v in declared.items()}
    params: dict[str, Any] = {}
    for text in assignments:
        if "=" not in text:
            raise ParameterError(f"-p {text!r}: expected NAME=VALUE, e.g. -p seed=1")
        name, raw = text.split("=", 1)
        name = name.strip()
        if name not in RESERVED and name not in declared_by and name in (everywhere or {}):
            own = ", ".join(sorted(n for n in declared_by if n not in RESERVED)) or "none"
            selected = ", ".join(sorted({nb[:2] for v in declared.values() for nb in v}))
            raise ParameterError(
                f"{name}: not a parameter of the selected notebook(s) {selected} (it is one of notebook "
                f"{', '.join(nb[:2] for nb in everywhere[name])}); accepted for {selected}: {own}"
            )
        check_name(name, declared_by)  # a reserved or unknown name: its one line
        if name in params:
            raise ParameterError(f"{name}: given twice; accepted: one -p {name}=VALUE")
        defaults = declared.get(name, {})
        default_source = next(iter(defaults.values()), None)
        kind, item_kind = kind_of(name)
        how = example(name, _default_value(default_source)) if default_source else f"-p {name}=VALUE"
        params[name] = parse_value(name, raw, kind, item_kind, how)
    return params


def _default_value(source: str) -> Any:
    try:
        return ast.literal_eval(source)
    except (ValueError, SyntaxError):
        return source
