"""A job's bootstrap split among workers: parts of the resamples, claimed one at a time.

When N·B reaches ``split_bootstrap_min_work``, a job cuts its B resamples into parts whose
bounds are multiples of uqcore's block size (:func:`uqcore.stability.bootstrap_block_size`),
publishes them in Redis (``sub:{id}:split``, see :mod:`service.keys`) and enqueues one task
``uqeval.bootstrap_part(sub_id, token)`` per part on its own queue. Every process computing
parts — the job itself and each idle worker that takes such a task — claims parts one at a
time (work stealing):

- a claim is ``SET claim:{i} <claimant> NX PX ttl`` inside one script that skips the parts
  done: atomic, so no part is computed twice by live claimants;
- the claimant keeps its claim alive every ``heartbeat_interval_s`` (``heartbeat_ttl_s``); a
  claimant that dies (a killed worker) lets its claim expire and the part is claimed again;
- the values of a part (zlib-compressed float64) are written only while its claimant still
  holds the claim of the job's delivery, with a record of who computed it.

The job computes parts too and waits only on parts held by a live claimant, so with one worker
alive it computes them all. It then combines the parts in order
(:func:`uqcore.stability.combine_bootstrap_values`) and :func:`uqcore.stability.bootstrap`
computes the intervals from them: bit-identical to one worker with the same seed. The split's
keys expire after the job's hard time limit and are deleted when the job ends (also when it is
cancelled or lost); a part task that finds the split gone, or nothing left to claim, ends at
once.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import math
import os
import socket
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from service import keys
from service.memory import enforced
from service.settings import Settings
from service.store import Store, StoreUnavailable
from uqcore.stability import (
    BootstrapValues,
    bootstrap_block_size,
    combine_bootstrap_values,
    iter_bootstrap_values,
)
from worker.evaluation import bootstrap_options, inputs

__all__ = [
    "MAX_PARTS",
    "FreeCores",
    "PartLost",
    "SplitBoard",
    "SplitJob",
    "claimant_name",
    "plan_parts",
    "run_part_job",
    "run_parts",
]

log = logging.getLogger(__name__)

#: ``enqueue(sub_id, token, count, queue)``: publish ``count`` part tasks on ``queue``.
Enqueue = Callable[[str, str, int, str], None]

#: At most this many parts: enough to share a job among several workers and to re-compute
#: little when one dies, few enough that each part's blocks amortise its Redis round trips.
MAX_PARTS = 16

#: How often a process with nothing to claim looks again (s); it also checks its job then.
POLL_S = 0.05


class PartLost(BaseException):
    """The claim of the part being computed lapsed or the split ended: stop computing it.
    A BaseException, like the job's own stops, so that nothing on the way swallows it."""


def plan_parts(n: int, n_resamples: int, max_parts: int = MAX_PARTS) -> list[tuple[int, int]]:
    """The resample ranges of a split: at most ``max_parts``, each a whole number of uqcore's
    blocks (the last one ends at B), as even as the blocks allow."""
    block = bootstrap_block_size(n, n_resamples)
    blocks = math.ceil(n_resamples / block)
    count = max(1, min(max_parts, blocks))
    edges = [round(i * blocks / count) * block for i in range(count + 1)]
    edges[-1] = n_resamples
    return [(a, b) for a, b in itertools.pairwise(edges) if a < b]


def claimant_name(worker_name: str = "") -> str:
    """A name unique to one computing process and run: worker, host, pid and a nonce."""
    who = worker_name or socket.gethostname()
    return f"{who}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


_CLAIM = """
-- KEYS[1] split hash, KEYS[2] values hash; ARGV: token, claimant, ttl_ms, claim prefix, parts
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return -2 end
for i = 0, tonumber(ARGV[5]) - 1 do
  if redis.call('HEXISTS', KEYS[2], tostring(i)) == 0 then
    if redis.call('SET', ARGV[4] .. i, ARGV[2], 'NX', 'PX', tonumber(ARGV[3])) then
      return i
    end
  end
end
return -1
"""

_KEEP = """
-- KEYS[1] split hash, KEYS[2] claim; ARGV: token, claimant, ttl_ms
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return 0 end
if redis.call('GET', KEYS[2]) ~= ARGV[2] then return 0 end
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[3]))
return 1
"""

_PUT = """
-- KEYS[1] split hash, KEYS[2] values, KEYS[3] notes, KEYS[4] claim;
-- ARGV: token, claimant, part, values, notes
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return 0 end
if redis.call('GET', KEYS[4]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
redis.call('HSET', KEYS[3], ARGV[3], ARGV[5])
redis.call('DEL', KEYS[4])
return 1
"""


@dataclass(frozen=True)
class Split:
    """A published split: the job delivery it belongs to, the metrics, B and the parts."""

    token: str
    metrics: list[str]
    n_resamples: int
    parts: list[tuple[int, int]]


class SplitBoard:
    """The Redis side of the splits of one store (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        client = store.client
        self._claim = client.register_script(_CLAIM)
        self._keep = client.register_script(_KEEP)
        self._put = client.register_script(_PUT)

    def publish(self, sub_id: str, split: Split, ttl_s: int) -> None:
        """Start ``split`` for ``sub_id``, dropping what an earlier delivery left."""
        spec = {"metrics": split.metrics, "n_resamples": split.n_resamples, "parts": split.parts}

        def write() -> None:
            pipe = self.store.client.pipeline(transaction=True)
            self._delete(pipe, sub_id, len(split.parts))
            pipe.hset(keys.split(sub_id), mapping={"token": split.token, "spec": json.dumps(spec)})
            for key in (keys.split(sub_id), keys.split_values(sub_id), keys.split_notes(sub_id)):
                pipe.expire(key, ttl_s)
            pipe.execute()

        self.store._call(write)

    def read(self, sub_id: str) -> Split | None:
        token, raw = self.store._call(
            lambda: self.store.client.hmget(keys.split(sub_id), ["token", "spec"])
        )
        if token is None or raw is None:
            return None
        spec = json.loads(raw)
        return Split(
            token.decode() if isinstance(token, bytes) else str(token),
            list(spec["metrics"]),
            int(spec["n_resamples"]),
            [(int(a), int(b)) for a, b in spec["parts"]],
        )

    def claim(self, sub_id: str, token: str, claimant: str, count: int, ttl_s: float) -> int:
        """The part now claimed by ``claimant``; -1 when none is free (all done or held by
        live claimants), -2 when the split of ``token`` is gone."""
        prefix = keys.split_claim(sub_id, 0)[:-1]
        args: list[str | int] = [token, claimant, max(int(ttl_s * 1000), 1), prefix, count]
        return int(
            self.store._call(
                lambda: self._claim(keys=[keys.split(sub_id), keys.split_values(sub_id)], args=args)
            )
        )

    def keep(self, sub_id: str, token: str, part: int, claimant: str, ttl_s: float) -> bool:
        """Extend ``claimant``'s claim of ``part``; False when it no longer holds it."""
        ttl = max(int(ttl_s * 1000), 1)
        return bool(
            self.store._call(
                lambda: self._keep(
                    keys=[keys.split(sub_id), keys.split_claim(sub_id, part)],
                    args=[token, claimant, ttl],
                )
            )
        )

    def put(
        self, sub_id: str, token: str, part: int, claimant: str, values: BootstrapValues
    ) -> bool:
        """Store the values of ``part``; False (nothing written) when the claim was lost."""
        names = list(values)
        blob = zlib.compress(
            np.stack([np.asarray(values[k], dtype="<f8") for k in names]).tobytes(), 1
        )
        notes = {
            "by": claimant,
            "names": names,
            "reasons": values.undefined_reasons,
            "warnings": values.warnings,
            "at": time.time(),
        }
        return bool(
            self.store._call(
                lambda: self._put(
                    keys=[
                        keys.split(sub_id),
                        keys.split_values(sub_id),
                        keys.split_notes(sub_id),
                        keys.split_claim(sub_id, part),
                    ],
                    args=[token, claimant, part, blob, json.dumps(notes)],
                )
            )
        )

    def done(self, sub_id: str) -> int:
        """How many parts are done."""
        return int(self.store._call(lambda: self.store.client.hlen(keys.split_values(sub_id))))

    def free(self, sub_id: str, count: int) -> bool:
        """True when some part is neither done nor held (worth loading the arrays for)."""

        def read() -> bool:
            pipe = self.store.client.pipeline(transaction=False)
            for i in range(count):
                pipe.hexists(keys.split_values(sub_id), str(i))
                pipe.exists(keys.split_claim(sub_id, i))
            got = pipe.execute()
            return any(not got[2 * i] and not got[2 * i + 1] for i in range(count))

        return self.store._call(read)

    def notes(self, sub_id: str) -> dict[int, dict[str, Any]]:
        """Part -> its record (who computed it, the resampling's notes)."""
        raw = self.store._call(lambda: self.store.client.hgetall(keys.split_notes(sub_id)))
        return {int(k): json.loads(v) for k, v in raw.items()}

    def collect(self, sub_id: str, count: int) -> list[BootstrapValues] | None:
        """The values of parts 0..count-1 in order; None if one is missing."""

        def read() -> tuple[list[Any], list[Any]]:
            fields = [str(i) for i in range(count)]
            pipe = self.store.client.pipeline(transaction=False)
            pipe.hmget(keys.split_values(sub_id), fields)
            pipe.hmget(keys.split_notes(sub_id), fields)
            values, notes = pipe.execute()
            return values, notes

        values, notes = self.store._call(read)
        out = []
        for blob, raw in zip(values, notes, strict=True):
            if blob is None or raw is None:
                return None
            note = json.loads(raw)
            names = note["names"]
            flat = np.frombuffer(zlib.decompress(blob), dtype="<f8")
            stacked = flat.reshape(len(names), -1)
            out.append(
                BootstrapValues(
                    {k: stacked[j] for j, k in enumerate(names)},
                    undefined_reasons=note["reasons"],
                    warnings=note["warnings"],
                )
            )
        return out

    def drop(self, sub_id: str, count: int) -> None:
        """Delete the split and everything of its parts."""

        def write() -> None:
            pipe = self.store.client.pipeline(transaction=False)
            self._delete(pipe, sub_id, count)
            pipe.execute()

        self.store._call(write)

    @staticmethod
    def _delete(pipe: Any, sub_id: str, count: int) -> None:
        pipe.delete(keys.split(sub_id), keys.split_values(sub_id), keys.split_notes(sub_id))
        stale = [keys.split_claim(sub_id, i) for i in range(max(count, MAX_PARTS))]
        pipe.delete(*stale)


class ClaimKeeper(threading.Thread):
    """Keeps the claim of the part being computed alive; notes when it is lost."""

    def __init__(
        self, board: SplitBoard, sub_id: str, token: str, claimant: str, settings: Settings
    ) -> None:
        super().__init__(name=f"split-claim-{sub_id}", daemon=True)
        self.board = board
        self.sub_id = sub_id
        self.token = token
        self.claimant = claimant
        self.settings = settings
        self.part: int | None = None
        self.lost = threading.Event()
        self.stopped = threading.Event()

    def hold(self, part: int | None) -> None:
        self.part = part
        self.lost.clear()

    def run(self) -> None:
        while not self.stopped.wait(self.settings.heartbeat_interval_s):
            part = self.part
            if part is None:
                continue
            try:
                held = self.board.keep(
                    self.sub_id, self.token, part, self.claimant, self.settings.heartbeat_ttl_s
                )
            except StoreUnavailable as exc:  # the TTL decides whether the claim survives
                log.warning("claim of part %s of %s: %s", part, self.sub_id, exc)
                continue
            if not held and self.part == part:
                self.lost.set()

    def check(self) -> None:
        if self.lost.is_set():
            raise PartLost

    def stop(self) -> None:
        self.stopped.set()


#: The shortest window over which :class:`FreeCores` measures the machine's load (s).
FREE_CORES_WINDOW_S = 0.1


def _cpu_times() -> tuple[float, float, int] | None:
    """(idle jiffies, all jiffies, CPUs) of the machine from ``/proc/stat``; None elsewhere."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    head = lines[0].split() if lines else []
    if not head or head[0] != "cpu" or len(head) < 6:
        return None
    ticks = [float(v) for v in head[1:]]
    cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    return ticks[3] + ticks[4], sum(ticks), max(cpus, 1)  # idle + iowait


class FreeCores:
    """The cores of this machine free for this process: idle, or busy with this process
    itself (what it frees when it stops), over the window since the last reading (at least
    :data:`FREE_CORES_WINDOW_S`). ``None`` where ``/proc/stat`` cannot be read."""

    def __init__(
        self,
        times: Callable[[], tuple[float, float, int] | None] = _cpu_times,
        own: Callable[[], float] = time.process_time,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._times, self._own, self._clock, self._sleep = times, own, clock, sleep
        self._last = (times(), own(), clock())

    def __call__(self) -> float | None:
        then, own_then, at = self._last
        left = FREE_CORES_WINDOW_S - (self._clock() - at)
        if left > 0:
            self._sleep(left)
        now, own_now, at_now = self._times(), self._own(), self._clock()
        self._last = (now, own_now, at_now)
        if then is None or now is None or now[1] <= then[1]:
            return None
        cpus = now[2]
        idle = (now[0] - then[0]) / (now[1] - then[1]) * cpus
        mine = (own_now - own_then) / max(at_now - at, 1e-9)
        return min(float(cpus), idle + mine)


def _claimed(
    board: SplitBoard,
    sub_id: str,
    split: Split,
    claimant: str,
    settings: Settings,
    keeper: ClaimKeeper,
    *,
    wait: Callable[[], None] | None,
    free: Callable[[], float | None] | None = None,
) -> Iterator[tuple[int, int]]:
    """The ranges this process claims, one at a time. With ``wait`` (the job), when every
    part left is held by another claimant it calls ``wait()`` and tries again until all
    are done; without (a part task) it stops, and it also stops before a claim when
    ``free()`` (:class:`FreeCores`) finds fewer free cores than
    ``split_bootstrap_min_idle_cores``."""
    count = len(split.parts)
    while True:
        if free is not None and not _enough(free(), settings):
            return
        part = board.claim(sub_id, split.token, claimant, count, settings.heartbeat_ttl_s)
        if part == -2:
            return
        if part >= 0:
            keeper.hold(part)
            yield split.parts[part]
            continue
        if wait is None or board.done(sub_id) >= count:
            return
        wait()


def _enough(free: float | None, settings: Settings) -> bool:
    """Whether ``free`` cores (None: unknown) let a worker take a part of another's job."""
    return free is None or free >= settings.split_bootstrap_min_idle_cores


def run_parts(
    board: SplitBoard,
    sub_id: str,
    split: Split,
    claimant: str,
    settings: Settings,
    prediction: Any,
    y: Any,
    options: Mapping[str, Any],
    *,
    wait: Callable[[], None] | None = None,
    progress: Callable[[float], None] | None = None,
    free: Callable[[], float | None] | None = None,
) -> int:
    """Claim and compute parts of ``split`` until none is left to claim; returns how many
    this process computed. ``progress(fraction)`` after each block (also where the caller
    stops a cancelled job); ``wait`` and ``free`` as in :func:`_claimed`. A part whose claim
    is lost meanwhile is abandoned (:class:`PartLost`) and claiming goes on."""
    keeper = ClaimKeeper(board, sub_id, split.token, claimant, settings)
    keeper.start()
    count = len(split.parts)
    computed = [0]
    try:
        while True:
            ranges = _claimed(
                board, sub_id, split, claimant, settings, keeper, wait=wait, free=free
            )

            def report(start: int, stop: int, fraction: float) -> None:
                keeper.check()
                if progress is not None:
                    progress((computed[0] + fraction) / count)

            try:
                for values in iter_bootstrap_values(
                    prediction, y, ranges=ranges, progress=report, **options
                ):
                    part = keeper.part
                    assert part is not None
                    if board.put(sub_id, split.token, part, claimant, values):
                        computed[0] += 1
                    keeper.hold(None)
                return computed[0]
            except PartLost:
                log.info("part %s of %s: claim lost, going on", keeper.part, sub_id)
                keeper.hold(None)
    finally:
        keeper.stop()


class SplitJob:
    """The split of one job's bootstrap (the ``split`` callback of
    :func:`worker.evaluation.compute`): decides, publishes, enqueues, computes and combines.

    ``enqueue(sub_id, token, count, queue)`` publishes ``count`` part tasks on the job's
    ``queue`` (None: no other worker is asked; the job computes every part). ``check()``
    raises when the job must stop (its cancel and lost checkpoint)."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        sub_id: str,
        token: str,
        *,
        worker_name: str = "",
        queue: str = "cpu",
        enqueue: Enqueue | None = None,
        check: Callable[[], None] = lambda: None,
    ) -> None:
        self.queue = queue
        self.store = store
        self.settings = settings
        self.sub_id = sub_id
        self.token = token
        self.worker_name = worker_name
        self.enqueue = enqueue
        self.check = check
        #: part -> who computed it, after a split run (for logs and tests)
        self.computed_by: dict[int, str] = {}
        self.parts: list[tuple[int, int]] = []
        self._claimant = claimant_name(worker_name)

    def provenance(self) -> dict[str, Any] | None:
        """How the bootstrap was split, for the result's provenance (None: it was not): the
        parts' resample ranges and, per part, which process computed it (0: the job's own,
        1, 2, ...: the others in order of appearance; no names of machines)."""
        if not self.computed_by:
            return None
        order = {self._claimant: 0}
        by = []
        for i in range(len(self.parts)):
            who = self.computed_by.get(i, "")
            by.append(order.setdefault(who, len(order)))
        return {"parts": [list(p) for p in self.parts], "computed_by": by}

    def __call__(
        self,
        prediction: Any,
        y: Any,
        options: Mapping[str, Any],
        progress: Callable[[float], None],
    ) -> BootstrapValues | None:
        n = int(np.shape(y)[0])
        b_count = int(options["n_resamples"])
        if n * b_count < self.settings.split_bootstrap_min_work:
            return None
        parts = plan_parts(n, b_count)
        if len(parts) < 2:
            return None
        self.parts = parts
        board = SplitBoard(self.store)
        split = Split(self.token, list(options["metrics"]), b_count, parts)
        board.publish(self.sub_id, split, self.settings.job_hard_time_limit_s)
        try:
            if self.enqueue is not None:
                try:
                    self.enqueue(self.sub_id, self.token, len(parts) - 1, self.queue)
                except Exception as exc:  # the job computes the parts itself
                    log.warning("part tasks of %s not enqueued: %s", self.sub_id, exc)
            claimant = self._claimant

            def wait() -> None:
                self.check()
                progress(board.done(self.sub_id) / len(parts))
                time.sleep(POLL_S)

            def report(fraction: float) -> None:
                self.check()
                progress(fraction)

            run_parts(
                board,
                self.sub_id,
                split,
                claimant,
                self.settings,
                prediction,
                y,
                options,
                wait=wait,
                progress=report,
            )
            found = board.collect(self.sub_id, len(parts))
            if found is None:  # pragma: no cover - every part is done when run_parts returns
                raise RuntimeError("a part of the split bootstrap is missing")
            self.computed_by = {i: str(n["by"]) for i, n in board.notes(self.sub_id).items()}
            log.info("split bootstrap of %s: parts by %s", self.sub_id, self.computed_by)
            progress(1.0)
            return combine_bootstrap_values(found)
        finally:
            with contextlib.suppress(StoreUnavailable):
                board.drop(self.sub_id, len(parts))


def run_part_job(
    store: Store,
    settings: Settings,
    backend: Any,
    sub_id: str,
    token: str,
    *,
    worker_name: str = "",
    memory_budget: int | None = None,
) -> str:
    """The task ``uqeval.bootstrap_part``: compute parts of the split of job delivery ``token``
    until none is left to claim; returns what happened (for logs and tests).

    Ends at once ("skipped:...") when the split is gone (the job ended, was cancelled, or a
    later delivery of it started), every part is done or held, or the machine has fewer free
    cores than ``split_bootstrap_min_idle_cores`` (the job's own threads may be using them),
    before loading anything; it stops taking parts when the free cores fall below that.
    """
    board = SplitBoard(store)
    split = board.read(sub_id)
    if split is None or split.token != token:
        return "skipped:gone"
    if not board.free(sub_id, len(split.parts)):
        return "skipped:nothing-left"
    free = FreeCores()
    if not _enough(free(), settings):
        log.info("split bootstrap of %s: no part taken, no free core here", sub_id)
        return "skipped:no-free-core"
    record = store.get_submission(sub_id)
    # The job's own loader: the public rows of a benchmark (the job splits only those).
    arrays = None if record is None else store.load_part(record, "public")
    if record is None or arrays is None:
        return "skipped:gone"
    given = inputs(record.kind, arrays, backend)
    options = bootstrap_options(record.analyses, split.metrics, given)
    claimant = claimant_name(worker_name)
    with enforced(memory_budget) if memory_budget is not None else contextlib.nullcontext():
        computed = run_parts(
            board,
            sub_id,
            split,
            claimant,
            settings,
            given.prediction,
            given.y,
            options,
            free=free,
        )
    log.info("split bootstrap of %s: %s computed %d part(s)", sub_id, claimant, computed)
    return f"computed:{computed}"
