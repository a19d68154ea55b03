"""The pipeline: runners, the commit facades, finalize sequence, summary, journal."""
