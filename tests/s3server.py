"""The S3-compatible server of the tests: moto's server, which keeps its objects across a
restart.

moto keeps objects in memory; with its request recorder on (``MOTO_ENABLE_RECORDING``,
``MOTO_RECORDER_FILEPATH``) every request is appended to a file. Started again on a recording,
this process replays it into a server on a private port first, then opens the public port
(both servers share the process' state), so that no client ever sees the server half
restored — as a server with its data on disk would behave.

    python -m tests.s3server PORT
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from moto.moto_api import recorder
from moto.moto_server.threaded_moto_server import ThreadedMotoServer

from service.redis_server import free_port


def main() -> None:
    port = int(sys.argv[1])
    recording = Path(os.environ["MOTO_RECORDER_FILEPATH"])
    if recording.exists() and recording.stat().st_size:
        inner_port = free_port()
        inner = ThreadedMotoServer("127.0.0.1", inner_port, verbose=False)
        inner.start()
        recorder.replay_recording(target_host=f"http://127.0.0.1:{inner_port}")
        inner.stop()
    ThreadedMotoServer("127.0.0.1", port, verbose=False).start()
    threading.Event().wait()  # until killed


if __name__ == "__main__":
    main()
