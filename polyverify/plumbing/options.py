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
  and a bad value are one-line :class:`~polyverify.plumbing.cli.UsageError`\\ s.

:func:`split_list` reads a comma-separated list option (the grids' lists, roundoff's lists); a value
given twice is refused, naming it.

A sweep cell of an experiment has no command line: its config is a frozen dataclass of its own,
a :class:`CellConfig` declared with :func:`cell_config` (keyword-only fields; :func:`option` gives a
field its allowed ``choices`` and a ``check``), every key the cell reads with its default in one
place.  ``Cfg.from_mapping(config, where=...)`` builds it from a grid's dict (or a record's
``config``), refusing an unknown key, a missing required key and a value of the wrong type, outside
``choices`` or failing its check with one line (:class:`ConfigError`: a ``UsageError`` for the
commands, a ``ValueError`` for the cells' callers); ``to_mapping()`` gives back the dict it was built
from, key for key, so that a grid's dicts, the sweep runner's cell ids and the committed records'
``config`` stay what they were.  :func:`one_of` picks a grid's cell class by a key (``part``, ``kind``).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
from typing import Any

from polyverify.plumbing.cli import UsageError


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
    cls.__doc__ = doc or f"The options of {parser.prog}, typed (polyverify.plumbing.options.config_class)."

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
    """A comma-separated CLI list: non-empty items, converted, finite numbers, no value twice (a
    repeated value is refused, naming it: a list that silently shrinks is not the list asked for)."""
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
    seen: dict = {}
    for item, v in zip(items, vals):
        if v in seen:
            same = f"{item!r}" if item == seen[v] else f"{item!r} (= {seen[v]!r})"
            raise UsageError(f"{flag}: {same} is given twice in {s!r:.200}; give each value once")
        seen[v] = item
    if not allow_large and len(vals) > limit:
        raise UsageError(f"{flag} has {len(vals)} values, above the limit {limit} (pass --allow-large to allow more)")
    return vals


# ------------------------------------------------------------------ a sweep cell's config, typed

class ConfigError(UsageError, ValueError):
    """A bad cell config, said in one line (a UsageError for the commands, a ValueError for callers of a cell)."""


def option(default=dataclasses.MISSING, *, choices=None, check=None):
    """A :class:`CellConfig` field: ``default`` (none: the key is required), the values it may take
    (``choices``) and ``check``, a pair ``(predicate, what it must be)`` (e.g. ``(positive, ">= 1")``);
    None, where the field's type allows it, is not checked."""
    return dataclasses.field(default=default, metadata={"choices": tuple(choices) if choices else None,
                                                        "check": check})


def cell_config(cls):
    """``cls`` (a :class:`CellConfig` subclass) as a frozen, keyword-only dataclass."""
    return dataclasses.dataclass(frozen=True, kw_only=True)(cls)


def positive(x) -> bool:
    return x >= 1


def non_negative(x) -> bool:
    return x >= 0


def _type_name(tp) -> str:
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join("None" if a is type(None) else _type_name(a) for a in args)
    if typing.get_origin(tp) in (list, tuple):
        return f"a list of {_type_name(args[0])}" if args else "a list"
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(tp, str(tp))


def _is(tp, v) -> bool:
    """Whether ``v`` (as a grid or a JSON record holds it) is of the field type ``tp``."""
    if tp is Any:
        return True
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_is(a, v) for a in args)
    if origin in (list, tuple):
        return isinstance(v, (list, tuple)) and all(_is(args[0], x) for x in v) if args else isinstance(v, (list, tuple))
    if tp is type(None):
        return v is None
    if tp is float:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if tp is int:
        return isinstance(v, int) and not isinstance(v, bool)
    return isinstance(v, tp)


class CellConfig:
    """Base of a sweep cell's typed config (declare it with :func:`cell_config`).  Every value is
    checked when the config is made, however it is made; a subclass adds checks between fields in
    ``validate`` (raising :class:`ConfigError`)."""

    def __post_init__(self):
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if not _is(hints[f.name], v):
                raise ConfigError(f"{f.name} must be {_type_name(hints[f.name])}, got {v!r:.80}")
            choices, check = f.metadata.get("choices"), f.metadata.get("check")
            if choices and v not in choices:
                raise ConfigError(f"{f.name} must be one of {', '.join(map(repr, choices))}, got {v!r:.80}")
            if check and v is not None and not check[0](v):
                raise ConfigError(f"{f.name} must be {check[1]}, got {v!r:.80}")
        self.validate()

    def validate(self) -> None:
        """Checks between fields (none here)."""

    @classmethod
    def keys(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_mapping(cls, config: dict, *, where: str = "cell"):
        """From a grid's (or a record's) dict; one-line :class:`ConfigError` naming ``where``."""
        if not isinstance(config, dict):
            raise ConfigError(f"{where}: a cell's config is a dict, got {type(config).__name__}")
        names = cls.keys()
        unknown = [k for k in config if k not in names]
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                              f"{cls.__name__} takes {', '.join(names)}")
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in config
                   and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        if missing:
            raise ConfigError(f"{where}: the config needs {', '.join(map(repr, missing))}")
        try:
            obj = cls(**config)
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from None
        object.__setattr__(obj, "_given", tuple(config))
        return obj

    def to_mapping(self) -> dict:
        """The dict this config was made from (its keys, in their order, with their values); a config
        made directly: every field."""
        given = getattr(self, "_given", None)
        return {k: getattr(self, k) for k in (self.keys() if given is None else given)}


def one_of(config: dict, key: str, classes: dict, *, where: str = "cell"):
    """``classes[config[key]].from_mapping(config)``: a grid whose cells differ by ``key`` (``part``,
    ``kind``); a missing or unknown value is a one-line :class:`ConfigError`."""
    value = config.get(key) if isinstance(config, dict) else None
    if value not in classes:
        raise ConfigError(f"{where}: {key} must be one of {', '.join(map(repr, classes))}, got {value!r:.80}")
    return classes[value].from_mapping(config, where=where)
