"""Plain data between a sandboxed program and its grader: the one thing an answer sends back.

An out-of-domain program (programs.py) calls functions and reports what each returned, or the
type of what it raised, as one JSON document on $SWE_RL_REPORT_FD; the grader decodes it here
and compares on the host. The encoding keeps the distinctions Python's `==` and the graders
draw (tuple and list, int, float and bool, set and frozenset, bytes, complex, dicts with any
hashable keys):

    None, bool, str, int (|x| < 2**63), float   JSON's own (float as its repr; NaN, Infinity)
    list                                        a JSON array
    {"t": [...]} tuple   {"s": [...]} set   {"f": [...]} frozenset   {"d": [[k, v], ...]} dict
    {"b": "hex"} bytes   {"c": [re, im]} complex   {"x": "hex"} a larger int

and, only as a whole result (the top level of one call's entry), {"e": [type name, message]}
for an exception (Raised) and {"u": type name} for a value that is not plain data (Unplain: an
object of a user class, a subclass of int, str, list or dict, whatever its `__eq__`; a
structure deeper than MAX_DEPTH or holding a cycle). Nothing else decodes: `decode_results`
is the host's strict reader (exact types, one tag per object, bounded depth, the expected
count), and what it returns holds only builtin values and those two markers, whose `==` is
this module's own.

This file is also the encoder inside the sandbox: programs.py prepends its text to each
program, so it imports only the standard library and keeps `from __future__` first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

MAX_DEPTH = 64  # nesting of containers; deeper is not plain data (and no grader needs it)
_SMALL = 1 << 63  # ints at least this large travel as hex: JSON's decimal ints stop at 4300 digits
_SCALARS = (type(None), bool, int, float, str)


@dataclass(frozen=True)
class Raised:
    """A call that raised: equal to another Raised of the same exception type."""

    name: str
    message: str = field(default="", compare=False)


@dataclass(frozen=True)
class Unplain:
    """A result that is not plain data: equal to nothing but the same marker."""

    name: str


def _tagged(value: Any, depth: int) -> Any:
    """`value` as JSON-ready data; TypeError when it is not plain data."""
    kind = type(value)
    if depth > MAX_DEPTH:
        raise TypeError(f"nested deeper than {MAX_DEPTH}")
    if kind is int and not -_SMALL < value < _SMALL:
        return {"x": hex(value)}
    if kind in _SCALARS:
        return value
    if kind is list:
        return [_tagged(v, depth + 1) for v in value]
    tags: dict[type, str] = {tuple: "t", set: "s", frozenset: "f"}
    if kind in tags:
        return {tags[kind]: [_tagged(v, depth + 1) for v in value]}
    if kind is dict:
        return {"d": [[_tagged(k, depth + 1), _tagged(v, depth + 1)] for k, v in value.items()]}
    if kind is bytes:
        return {"b": value.hex()}
    if kind is complex:
        return {"c": [value.real, value.imag]}
    raise TypeError(kind.__name__)


def encode_results(results: list[Any]) -> str:
    """One JSON document: each result (a value, a Raised or an Unplain) tagged as above."""
    out: list[Any] = []
    for result in results:
        if type(result) is Raised:
            out.append({"e": [result.name, result.message]})
        elif type(result) is Unplain:
            out.append({"u": result.name})
        else:
            try:
                out.append(_tagged(result, 0))
            except (TypeError, RecursionError) as exc:
                out.append({"u": str(exc)[:100]})
    return json.dumps(out)


class _Tag(tuple):  # (key, payload) of a one-key JSON object; a real subclass never comes from JSON
    pass


def _one_tag(pairs: list[tuple[str, Any]]) -> _Tag:
    if len(pairs) != 1:
        raise ValueError("an object of more than one key")
    return _Tag(pairs[0])


def _plain(doc: Any, depth: int) -> Any:
    """The value `doc` (parsed JSON) stands for; ValueError or TypeError for anything else."""
    if depth > MAX_DEPTH:
        raise ValueError("too deep")
    kind = type(doc)
    if kind in _SCALARS:
        return doc
    if kind is list:
        return [_plain(v, depth + 1) for v in doc]
    if kind is not _Tag:
        raise ValueError(f"not an encoded value: {kind.__name__}")
    key, payload = doc
    if key in ("t", "s", "f") and type(payload) is list:
        items = [_plain(v, depth + 1) for v in payload]
        return {"t": tuple, "s": set, "f": frozenset}[key](items)  # an unhashable member: TypeError
    if key == "d" and type(payload) is list and all(type(p) is list and len(p) == 2 for p in payload):
        return {_plain(k, depth + 1): _plain(v, depth + 1) for k, v in payload}
    if key == "b" and type(payload) is str:
        return bytes.fromhex(payload)
    if key == "c" and type(payload) is list and len(payload) == 2 and all(type(p) is float for p in payload):
        return complex(payload[0], payload[1])
    if key == "x" and type(payload) is str and len(payload) <= 1 << 20:
        return int(payload, 16)
    raise ValueError(f"not an encoded value: {key!r}")


def _result(doc: Any) -> Any:
    if type(doc) is _Tag and doc[0] == "e":
        payload = doc[1]
        if type(payload) is list and len(payload) == 2 and all(type(p) is str for p in payload):
            return Raised(payload[0][:100], payload[1][:300])
        raise ValueError("a malformed exception")
    if type(doc) is _Tag and doc[0] == "u" and type(doc[1]) is str:
        return Unplain(doc[1][:100])
    return _plain(doc, 0)


def decode_results(data: bytes | str, count: int | None = None) -> list[Any]:
    """The results a report holds, exactly `count` of them when given; ValueError if it is
    anything but what `encode_results` writes (RecursionError and TypeError are reported as
    ValueError too)."""
    try:
        doc = json.loads(data, object_pairs_hook=_one_tag)
        if type(doc) is not list or (count is not None and len(doc) != count):
            raise ValueError(f"not a list of {count} results")
        return [_result(d) for d in doc]
    except (TypeError, RecursionError, UnicodeDecodeError) as exc:
        raise ValueError(f"{type(exc).__name__}: {exc}") from None
