"""Did-you-mean suggestions for unknown config keys.

Rivet's rule (docs/rivet-compat.md "Config load order", step 4): suggest the closest known key when its Levenshtein
distance is at most ``max(2, len(key) // 3)``; otherwise fall back to a substring match
(one name contains the other). When nothing is close we say nothing — a wrong guess
is worse than no guess.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Substring matches shorter than this are noise ("a" is inside every key).
_MIN_SUBSTRING = 3


def levenshtein(a: str, b: str) -> int:
    """Classic edit distance (insert, delete, substitute all cost 1)."""
    if a == b:
        return 0
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def max_distance(key: str) -> int:
    """How many edits still count as a typo for a key of this length."""
    return max(2, len(key) // 3)


def is_substring_match(key: str, candidate: str) -> bool:
    """True when one name contains the other and the shorter one is long enough to mean it."""
    k, c = key.lower(), candidate.lower()
    shorter = k if len(k) <= len(c) else c
    return len(shorter) >= _MIN_SUBSTRING and (k in c or c in k)


def suggest(key: str, candidates: Iterable[str]) -> str | None:
    """Return the best candidate for a mistyped `key`, or None when nothing is close."""
    names = sorted(set(candidates))
    if not names or not key:
        return None
    scored = sorted((levenshtein(key.lower(), c.lower()), c) for c in names)
    distance, best = scored[0]
    if distance <= max_distance(key):
        return best
    substring = [c for c in names if is_substring_match(key, c)]
    if substring:
        return min(substring, key=lambda c: (abs(len(c) - len(key)), c))
    return None
