"""What a run tells people while and after it runs: live progress (progress.py), the run
report under `.rivet/runs/<run_id>/` (report.py) and Slack / webhook notifications
(notify.py).

The pipeline feeds and calls these; they never drive a run. Nothing is imported here, so
importing one of them does not load the others.
"""
