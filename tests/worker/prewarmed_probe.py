"""Run as ``python -m tests.worker.prewarmed_probe OUT CODE [SLEEP_S]`` by
``test_prewarmed.py``: writes what the process sees to the JSON file ``OUT``, prints a line to
stdout and to stderr, sleeps ``SLEEP_S`` seconds and exits with ``CODE``."""

from __future__ import annotations

import json
import os
import sys
import time

if __name__ == "__main__":
    out, code = sys.argv[1], int(sys.argv[2])
    seen = {
        "name": __name__,
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "session_leader": os.getsid(0) == os.getpid(),
        "stdin": os.path.realpath(f"/proc/self/fd/{sys.stdin.fileno()}"),
        "loaded": {m: m in sys.modules for m in ("numpy", "celery", "service.settings")},
    }
    with open(out, "w") as f:
        json.dump(seen, f)
    sys.stdout.write("to stdout\n")
    sys.stdout.flush()
    sys.stderr.write("to stderr\n")
    time.sleep(float(sys.argv[3]) if len(sys.argv) > 3 else 0.0)
    sys.exit(code)
