"""The ``uqeval`` command line entry point."""

from __future__ import annotations

import argparse

import uqcore


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="uqeval", description="uq-eval command line.")
    parser.add_argument("--version", action="store_true", help="print the uqcore version")
    args = parser.parse_args(argv)
    if args.version:
        print(uqcore.__version__)
        return 0
    parser.print_help()
    return 0
