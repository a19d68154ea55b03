"""Chunked exports: the layout of their windows (strategy, source probes, pure math) and window SQL.

A chunked export runs as many short queries, one per window, each its own part(s),
tracked by a checkpoint so a crash resumes from the last completed window (docs/invariants.md
I5/I6). See model.py for the shapes every other module relies on.
"""

from rivet_core.chunks.model import ChunkLayout, ChunkWindow

__all__ = ["ChunkLayout", "ChunkWindow"]
