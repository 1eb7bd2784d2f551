"""``python -m uqeval`` runs the ``uqeval`` command line."""

from uqeval.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
