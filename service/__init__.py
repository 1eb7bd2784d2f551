"""The uq-eval REST service: FastAPI app, Redis store, settings and the ``uqeval`` CLI."""
