"""The HTTP API of uq-eval: a FastAPI app (see :func:`service.api.app.create_app`)."""
