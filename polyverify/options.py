"""A command's options as one typed config, built by its command line and by a sweep cell alike.

:func:`config_class` makes a frozen dataclass from an ``argparse`` parser: one field per option
(its ``dest``), typed by the option's converter (``int``, ``float``, ``str``, ``bool`` for a flag,
or what a custom converter returns) and defaulting to the option's default, so that the parser
holds the options' defaults, help and checks in one place.  The class gets two constructors:

* ``from_args(namespace)``: from the parsed command line;
* ``from_mapping(config, where=..., exclude=...)``: from a sweep cell's config (a dict keyed by
  ``dest``), each value converted and checked as the command line would read it -- ``True`` a
  flag, a list a comma-separated value, anything else its text through the option's converter and
  choices -- with no command line in between; a key the command does not have (or ``exclude``)
  and a bad value are one-line :class:`~polyverify.cli.UsageError`\\ s.

:func:`split_list` reads a comma-separated list option (the grids' lists, roundoff's lists).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
from typing import Any

from polyverify.cli import UsageError


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.dest != "help" and not isinstance(a, argparse._HelpAction)]


def _flag(action: argparse.Action) -> str:
    return max(action.option_strings, key=len) if action.option_strings else action.dest


def _is_switch(action: argparse.Action) -> bool:
    return isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction))


def _field_type(action: argparse.Action):
    if _is_switch(action):
        return bool
    if action.type in (int, float, str):
        return action.type
    return Any if action.type is not None else str


def _convert(action: argparse.Action, key: str, value, where: str):
    """``value`` as the command line would read it for ``action`` (UsageError naming ``where``)."""
    flag = _flag(action)
    if _is_switch(action):
        if value is not True:
            raise UsageError(f"{where}: argument {flag}: ignored explicit argument {value!r}")
        return not isinstance(action, argparse._StoreFalseAction)
    if value is True:
        raise UsageError(f"{where}: argument {flag}: expected one argument")
    if isinstance(value, dict) or (isinstance(value, list) and not action.option_strings):
        raise UsageError(f"{where}: {key} must be a single value, got {value!r:.80}")
    text = ",".join(str(t) for t in value) if isinstance(value, list) else str(value)
    conv = action.type or str
    try:
        out = conv(text)
    except argparse.ArgumentTypeError as e:
        raise UsageError(f"{where}: argument {flag}: {e}") from None
    except (TypeError, ValueError):
        name = getattr(conv, "__name__", repr(conv))
        raise UsageError(f"{where}: argument {flag}: invalid {name} value: {text!r}") from None
    if action.choices is not None and out not in action.choices:
        raise UsageError(f"{where}: argument {flag}: invalid choice: {out!r} (choose from "
                         f"{', '.join(map(repr, action.choices))})")
    return out


def config_class(parser: argparse.ArgumentParser, name: str, *, module: str, doc: str | None = None) -> type:
    """A frozen dataclass ``name`` with a field per option of ``parser`` (module docstring), to be
    bound to the same name in ``module`` (so that its instances pickle by reference)."""
    actions = _options(parser)
    fields = [(a.dest, _field_type(a), dataclasses.field(default=a.default)) for a in actions]
    cls = dataclasses.make_dataclass(name, fields, frozen=True)
    cls.__doc__ = doc or f"The options of {parser.prog}, typed (polyverify.options.config_class)."

    def from_args(klass, namespace: argparse.Namespace):
        return klass(**{a.dest: getattr(namespace, a.dest) for a in actions})

    def from_mapping(klass, config: dict, *, where: str = "cell", exclude=(), **fixed):
        """From a sweep cell's ``config``; ``fixed``: values of excluded options the caller sets."""
        by_dest = {a.dest: a for a in actions if a.dest not in exclude}
        unknown = [k for k in config if k not in by_dest]
        if unknown:
            raise UsageError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; accepted: "
                             f"{', '.join(by_dest)}")
        values = {a.dest: a.default for a in actions}
        for key, action in by_dest.items():
            v = config.get(key)
            if v is None or v is False:
                continue
            values[key] = _convert(action, key, v, where)
        missing = [a.dest for a in by_dest.values() if a.required and config.get(a.dest) in (None, False)]
        if missing:
            raise UsageError(f"{where}: the config needs {missing[0]!r}")
        return klass(**{**values, **fixed})

    cls.from_args = classmethod(from_args)
    cls.from_mapping = classmethod(from_mapping)
    cls.__module__ = module
    return cls


def split_list(flag: str, s, conv=str, *, allow_large: bool = False, limit: int = 64) -> list:
    """A comma-separated CLI list: non-empty items, converted, duplicates dropped, finite numbers."""
    items = [t.strip() for t in str(s).split(",")]
    if not any(items):
        raise UsageError(f"{flag} is empty")
    if not all(items):
        raise UsageError(f"{flag}: empty item in {s!r}")
    try:
        vals = [conv(t) for t in items]
    except (ValueError, OverflowError):
        raise UsageError(f"{flag}: not a list of {getattr(conv, '__name__', 'valid')} values: {s!r}") from None
    if any(isinstance(v, float) and not math.isfinite(v) for v in vals):
        raise UsageError(f"{flag} must be finite numbers, got {s!r}")
    vals = list(dict.fromkeys(vals))
    if not allow_large and len(vals) > limit:
        raise UsageError(f"{flag} has {len(vals)} values, above the limit {limit} (pass --allow-large to allow more)")
    return vals
