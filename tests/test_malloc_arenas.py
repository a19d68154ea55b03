"""The glibc malloc arena cap (rivet_core/pipeline/resources/malloc_arenas.py), checked in a fresh process:
threads that allocate concurrently get at most the capped number of arenas, as glibc's own
`malloc_stats()` reports them; a user's MALLOC_ARENA_MAX is left alone."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = r"""
import ctypes, sys, threading
sys.path.insert(0, {root!r})
from rivet_core.pipeline.resources.malloc_arenas import limit_malloc_arenas
applied = limit_malloc_arenas() if {cap} else False
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
barrier = threading.Barrier(8)
def churn():
    barrier.wait()
    for _ in range(2000):
        blocks = [libc.malloc(4096) for _ in range(16)]
        for b in blocks:
            libc.free(b)
threads = [threading.Thread(target=churn) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print("applied", applied, flush=True)
libc.malloc_stats()  # per arena "Arena N:" on stderr
"""


def arenas_used(cap: bool, env: dict[str, str] | None = None) -> tuple[bool, int]:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", PROBE.format(root=root, cap=cap)],
                          capture_output=True, text=True, timeout=60, env=env, check=True)
    return "applied True" in done.stdout, done.stderr.count("Arena ")


def test_the_cap_limits_the_arenas_of_concurrently_allocating_threads() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    applied, capped = arenas_used(True, env)
    _, uncapped = arenas_used(False, env)
    assert applied
    assert capped <= 2
    assert uncapped > capped  # without the cap the same threads spread over more arenas


def test_a_users_malloc_arena_max_is_not_overridden() -> None:  # (this suite runs on Linux)
    applied, arenas = arenas_used(True, {**os.environ, "MALLOC_ARENA_MAX": "3"})
    assert not applied
    assert arenas <= 3


def test_other_platforms_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from rivet_core.pipeline.resources import malloc_arenas

    monkeypatch.setattr(malloc_arenas, "_applied", False)
    monkeypatch.setattr(malloc_arenas.sys, "platform", "darwin")
    assert malloc_arenas.limit_malloc_arenas() is False


# Arrow's pool: jemalloc unless the user chose one (ARROW_DEFAULT_MEMORY_POOL), set before
# pyarrow is imported (the variable is read when the default pool is first used).
POOL_PROBE = r"""
import sys
sys.path.insert(0, {root!r})
from rivet_core.pipeline.resources.malloc_arenas import limit_malloc_arenas
if {setup}:
    limit_malloc_arenas()
import pyarrow as pa
print(pa.default_memory_pool().backend_name)
"""


def _pool(setup: bool, env: dict[str, str]) -> str:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return subprocess.run([sys.executable, "-c", POOL_PROBE.format(root=root, setup=setup)],
                          capture_output=True, text=True, timeout=60, env=env, check=True).stdout.strip()


def test_arrow_uses_jemalloc_and_a_users_pool_is_not_overridden() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "ARROW_DEFAULT_MEMORY_POOL")}
    assert _pool(True, env) == "jemalloc"
    assert _pool(False, env) != "jemalloc"  # pyarrow's own default (mimalloc)
    assert _pool(True, {**env, "ARROW_DEFAULT_MEMORY_POOL": "system"}) == "system"
