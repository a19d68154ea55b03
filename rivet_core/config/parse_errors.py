"""Translate pydantic validation errors into Rivet-style messages (docs/rivet-compat.md "Config load order", step 4).

One line per problem, with the YAML location (`exports[0].destination`), the offending
key or value, and the fix: did-you-mean for unknown keys, the allowed values for a bad
enum, a hint for the classic missing fields. Pydantic's own text, tracebacks and
documentation URLs never reach the user. Values of secret-bearing fields are not shown.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from rivet_core.config.blocks import unknown_block_hint
from rivet_core.config.messages import describe_value, location
from rivet_core.config.prescan import BRACE_HINT
from rivet_core.config.suggest import suggest

_SECRET_FIELDS = {"password", "url", "webhook_url", "headers"}
_MISSING_HINTS = {
    ("source",): " — every config needs a `source:` block; run `rivet init` to generate one",
    ("exports",): " — add an `exports:` list with at least one export",
}
_FIELD_HINTS = {
    "name": " — every export needs a unique, filename-safe name, e.g. name: orders",
    "format": " — add format: parquet or format: csv",
    "destination": " — e.g. destination: {type: local, path: ./out}",
    "type": " — set the type explicitly",
}
_TYPE_WORDS = {
    "string": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "list": "a list",
    "dict": "a mapping",
    "model": "a mapping",
}


def _unwrap(annotation: Any) -> list[Any]:
    """The concrete types inside Optional/Union/Annotated."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        out: list[Any] = []
        for arg in typing.get_args(annotation):
            out.extend(_unwrap(arg))
        return out
    return [annotation]


def _model_at(root: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class whose fields are valid at `loc` (None if `loc` leaves the models)."""
    current: list[Any] = [root]
    for part in loc:
        nxt: list[Any] = []
        for ann in current:
            for typ in _unwrap(ann):
                origin = typing.get_origin(typ)
                if isinstance(typ, type) and issubclass(typ, BaseModel):
                    field = typ.model_fields.get(part) if isinstance(part, str) else None
                    if field is not None:
                        nxt.append(field.annotation)
                elif origin is list and isinstance(part, int):
                    nxt.append(typing.get_args(typ)[0])
                elif origin is dict:
                    nxt.append(typing.get_args(typ)[1])
        current = nxt
    for ann in current:
        for typ in _unwrap(ann):
            if isinstance(typ, type) and issubclass(typ, BaseModel):
                return typ
    return None


def _carries_blocks(loc: tuple[Any, ...]) -> bool:
    """True at the places an integration block may stand: the top level and one export."""
    return loc == () or (len(loc) == 2 and loc[0] == "exports" and isinstance(loc[1], int))


def _is_brace_value(value: Any) -> bool:
    """`path: {date}` parses as the mapping {date: None} — a sign of a missing quote."""
    return isinstance(value, dict) and bool(value) and all(v is None for v in value.values())


def _expected_word(err_type: str) -> str | None:
    for key, word in _TYPE_WORDS.items():
        if err_type.startswith(key):
            return word
    return None


def _one(root: type[BaseModel], err: dict[str, Any]) -> str:
    loc = tuple(p for p in err["loc"] if p != "[key]")
    err_type: str = err["type"]
    field: Any = loc[-1] if loc else None
    parent = location(loc[:-1])
    if isinstance(field, int) and len(loc) >= 2:  # a list item: name it `on[0]`
        field, parent = f"{location(loc[-2:-1])}[{field}]", location(loc[:-2])
    value = err.get("input")
    secret = any(p in _SECRET_FIELDS for p in loc if isinstance(p, str))
    shown = "" if secret else f" (got {describe_value(value)})"

    if err_type == "extra_forbidden":
        model = _model_at(root, loc[:-1])
        candidates = list(model.model_fields) if model else []
        message = f"unknown field `{field}` at {parent}"
        hint = suggest(str(field), candidates) if isinstance(field, str) else None
        if hint:
            return f"{message}. Did you mean `{hint}`?"
        if _carries_blocks(loc[:-1]) and isinstance(field, str):  # maybe an integration's block
            return f"{message}{unknown_block_hint(field)}"
        if candidates and len(candidates) <= 16:
            return f"{message} — remove it (valid fields: {', '.join(candidates)})"
        return f"{message} — remove it (see docs for the valid fields)"
    if err_type == "invalid_key":
        return f"key {describe_value(err.get('input'))} at {location(loc)} must be a string"
    if err_type == "missing":
        hint = _MISSING_HINTS.get(loc) or _FIELD_HINTS.get(str(field), "")
        return f"missing field `{field}` at {parent}{hint}"
    if err_type == "literal_error":
        expected = re.findall(r"'([^']*)'", str(err.get("ctx", {}).get("expected", "")))
        bad = (
            describe_value(value).strip("'")
            if not isinstance(value, dict | list)
            else describe_value(value)
        )
        return f"unknown variant `{bad}` for `{field}` at {parent} — expected one of: " + ", ".join(
            expected
        )
    if err_type in ("value_error", "assertion_error"):
        reason = str(err.get("ctx", {}).get("error", err.get("msg", "")))
        return f"invalid `{field}` at {parent}: {reason}"
    if err_type in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        ctx = err.get("ctx", {})
        op, bound = {
            "greater_than_equal": (">=", ctx.get("ge")),
            "greater_than": (">", ctx.get("gt")),
            "less_than_equal": ("<=", ctx.get("le")),
            "less_than": ("<", ctx.get("lt")),
        }[err_type]
        return f"`{field}` at {parent} must be {op} {bound}{shown}"
    if err_type in ("int_parsing_size", "finite_number"):  # 1e20, .inf: too big for any field
        from rivet_core.config.limits import upper_bound

        bound = upper_bound(loc)
        if bound is not None:
            return f"`{field}` at {parent} must be <= {bound}{shown} — use a value up to {bound}"
    if err_type in ("int_from_float",):
        return f"`{field}` at {parent} must be a whole number{shown}"
    word = _expected_word(err_type)
    if word is not None:
        message = f"`{field}` at {parent} must be {word}{shown}"
        if err_type == "string_type" and _is_brace_value(value):
            message += f"\n{BRACE_HINT}"
        return message
    if err_type == "finite_number":
        return f"`{field}` at {parent} must be a finite number{shown}"
    return f"invalid value for `{field}` at {parent}: {err.get('msg', 'invalid')}{shown}"


def translate(root: type[BaseModel], exc: ValidationError) -> list[str]:
    """Every pydantic error of `exc` as a user-facing sentence, in document order."""
    return [_one(root, err) for err in exc.errors(include_url=False)]
