"""One bounded parser for every exact rational a user writes (command-line flags, ``--set``
values, a weight file's metadata).

``fractions.Fraction`` reads ``"1e999999999"`` by computing ``10**999999999``: a billion-digit
integer, minutes of CPU and gigabytes before anything is checked.  :func:`parse_rational` refuses such a string *before* computing anything: it
matches the text against the grammar below, counts the digits and reads the exponent from at
most a few characters, and only then builds the Fraction.

Accepted text (surrounding whitespace ignored):

* an integer ``-3``, a fraction ``p/q`` (``q`` nonzero; spaces around ``/`` allowed);
* a decimal ``0.125``, ``.5``, ``-2.``, with an optional exponent ``e-3`` / ``E+4``.

Refused, with a one-line :class:`RationalError` naming ``what`` (the flag or field):

* more than ``max_digits`` digits in the numerator, the denominator or the decimal's digits
  (default :data:`MAX_DIGITS`, Python's own limit on converting a decimal string to an int,
  the rule ``circuits/io.py`` already applies to a circuit's constants);
* an exponent beyond ``max_exponent`` in magnitude (default :data:`MAX_EXPONENT`), read from
  its few characters before any power of ten is built; and a decimal whose value, written
  out, has a numerator or a denominator (``10**k`` before reduction) of more than
  ``max_digits`` digits (``1e4300`` has 4301): every accepted value prints as a string Python
  can convert back;
* anything else: ``inf``, ``nan``, ``1_000`` (``Fraction`` would take the underscores), hex,
  an empty string, a zero denominator.

Non-strings: an ``int`` or ``Fraction`` is returned as it is (``bool`` is refused); a finite
float is its exact binary value (``Fraction(0.1)`` is not 1/10).

This module imports nothing of the project (``polyverify/plumbing/cli.py`` and the loaders use it).
"""
from __future__ import annotations

import math
import re
from fractions import Fraction

__all__ = ["MAX_DIGITS", "MAX_EXPONENT", "RationalError", "parse_rational"]

#: the most digits a numerator, denominator or decimal may have (Python's default
#: ``sys.get_int_max_str_digits()``: the limit ``circuits/io.py`` applies to a circuit's constants)
MAX_DIGITS = 4300
#: the largest exponent magnitude of a decimal written with ``e`` (``1e4300`` has 4301 digits)
MAX_EXPONENT = 4300

# digits are ASCII only (``\d`` would take other scripts' digits, which Fraction reads too)
_FRACTION = re.compile(r"\s*([+-]?)([0-9]+)\s*(?:/\s*([0-9]+)\s*)?")
_DECIMAL = re.compile(r"\s*([+-]?)([0-9]*)\.?([0-9]*)(?:[eE]([+-]?)([0-9]+))?\s*")


class RationalError(ValueError):
    """A value that is not an exact rational within the stated bounds (one line, names the
    flag or field)."""


def _show(text: str) -> str:
    s = repr(text)
    return s if len(s) <= 40 else s[:30] + "..." + f" ({len(text)} characters)"


def parse_rational(text, what: str, *, max_digits: int = MAX_DIGITS,
                   max_exponent: int = MAX_EXPONENT) -> Fraction:
    """``text`` as an exact Fraction, or a :class:`RationalError` naming ``what`` (module
    docstring): the digit count and the exponent are checked before any big integer is built."""
    if isinstance(text, bool):
        raise RationalError(f"{what}: {text!r} is a bool, not a number")
    if isinstance(text, Fraction):
        return text
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise RationalError(f"{what}: {text!r} is not a finite number")
        return Fraction(text)
    if not isinstance(text, str):
        raise RationalError(f"{what}: {type(text).__name__} {_show(str(text))} is not an exact rational")
    if len(text) > 2 * max_digits + 64:  # longer than any accepted text: no regex over megabytes
        raise RationalError(f"{what}: {_show(text)} is too long for a rational (more than {max_digits} digits)")
    m = _FRACTION.fullmatch(text)
    if m:
        sign, p, q = m.groups()
        for part, name in ((p, "numerator"), (q, "denominator")):
            if part is not None and len(part.lstrip("0")) > max_digits:
                raise RationalError(f"{what}: {_show(text)} has a {len(part)}-digit {name}; at most "
                                    f"{max_digits} digits")
        den = int(q.lstrip("0") or "0") if q is not None else 1  # leading zeros: not digits
        if den == 0:
            raise RationalError(f"{what}: {_show(text)} is not an exact rational (a zero denominator)")
        return Fraction(int(sign + (p.lstrip("0") or "0")), den)
    m = _DECIMAL.fullmatch(text)
    if not m or not (m.group(2) or m.group(3)):
        raise RationalError(f"{what}: {_show(text)} is not an exact rational (an integer, p/q or a decimal "
                            f"such as 0.125 or 1e-3)")
    sign, whole, frac, esign, exp = m.groups()
    digits = (whole + frac).lstrip("0")
    if len(digits) > max_digits:
        raise RationalError(f"{what}: {_show(text)} has {len(digits)} digits; at most {max_digits}")
    e = 0
    if exp is not None:
        exp = exp.lstrip("0") or "0"
        if len(exp) > len(str(max_exponent)) or int(exp) > max_exponent:
            raise RationalError(f"{what}: {_show(text)} has the exponent {esign}{_show(exp)[1:-1]}; at most "
                                f"{max_exponent} in magnitude")
        e = -int(exp) if esign == "-" else int(exp)
    mant = int(sign + (digits or "0"))
    if not mant:
        return Fraction(0)
    e -= len(frac)
    size = len(str(abs(mant))) + e if e >= 0 else -e + 1  # digits of the numerator / of 10^-e
    if size > max_digits:
        raise RationalError(f"{what}: {_show(text)} written out has a {size}-digit "
                            f"{'numerator' if e >= 0 else 'denominator'}; at most {max_digits} digits")
    return Fraction(mant * 10 ** e) if e >= 0 else Fraction(mant, 10 ** -e)
