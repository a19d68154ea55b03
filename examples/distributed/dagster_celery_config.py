"""Celery settings of the workers (docs/distributed.md, section 4).

`celery -A dagster_celery.app worker` imports a module named `dagster_celery_config` when it
is on PYTHONPATH: put this directory there. The broker comes from the same variables the
runs use (RIVET_DAGSTER_EXECUTOR=celery), so workers and runs cannot disagree.
"""

import os

broker_url = os.environ["DAGSTER_CELERY_BROKER_URL"]
result_backend = os.environ.get("DAGSTER_CELERY_BACKEND_URL", broker_url)
# One window at a time per worker process, acknowledged when done: a long window never
# hides a queued one, and a worker that dies mid-window gives its task back to the broker.
worker_prefetch_multiplier = 1
task_acks_late = True
