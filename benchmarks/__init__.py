"""Reproducible export benchmark (issue 5): rivet vs peers vs floors; see harness.py."""
