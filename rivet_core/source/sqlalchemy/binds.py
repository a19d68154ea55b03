"""Rivet's `%s` statements as SQLAlchemy `text()` with bound parameters.

The engine-neutral layers write SQL in the `%s` convention the native drivers take; the
SQLAlchemy session and its dialect's catalog queries both run such SQL, so the translation
lives here, below both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rivet_core.errors import SourceError

#: SQLAlchemy's bind-parameter pattern in `text()` (sqlalchemy.sql.elements.TextClause);
#: the user's text is escaped with it so only Rivet's own placeholders bind.
_SA_BIND = re.compile(r"(?<![:\w\x5c]):(\w+)(?!:)", re.UNICODE)
_PLACEHOLDER = re.compile(r"%%|%s")


def to_text(sql: str, params: Sequence[Any]) -> Any:
    """`sql` in the `%s` convention as a SQLAlchemy `text()` with its parameters bound."""
    from sqlalchemy import bindparam, text
    from sqlalchemy.types import NullType

    if not params:
        return text(_SA_BIND.sub(lambda m: "\\" + m.group(0), sql))
    escaped = _SA_BIND.sub(lambda m: "\\" + m.group(0), sql)
    names: list[str] = []

    def placeholder(match: re.Match[str]) -> str:
        if match.group(0) == "%%":
            return "%"
        names.append(f"rivet_p{len(names)}")
        return ":" + names[-1]

    rendered = _PLACEHOLDER.sub(placeholder, escaped)
    if len(names) != len(params):
        raise SourceError(f"the statement has {len(names)} placeholder(s) but {len(params)} "
                          f"parameter(s) were given")
    # Untyped (NullType), as the native drivers bind: the server types the value from its
    # context. A typed bind would be cast by some dialects (psycopg's: `$1::VARCHAR`), and a
    # keyset bound written as text would no longer compare with an integer key.
    return text(rendered).bindparams(*[bindparam(n, v, type_=NullType())
                                       for n, v in zip(names, params, strict=True)])
