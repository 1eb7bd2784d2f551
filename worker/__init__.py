"""The uq-eval Celery worker: loads stored batches, calls uqcore, writes results."""
