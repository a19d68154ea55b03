"""What a run takes from the machine and the source, and how it gives way.

`governor.py` paces the reads by the source's own load signals (with `cpu_priority.py`'s
yield of this process's CPU under pressure); `window_sessions.py` pools the source sessions
chunk windows read through, each window in its own snapshot; `memory_guard.py` bounds what a
run holds in memory; `malloc_arenas.py` caps glibc's arenas before export threads start.
"""
