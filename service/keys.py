"""The Redis key schema of uq-eval: every key the project reads or writes, in one place.

All keys start with the versioned prefix ``uqeval:v1:``; a change of layout bumps the version,
so that an old and a new deployment never read each other's data by mistake. Celery's own keys
(the broker lists ``cpu``/``gpu``, ``unacked``, ``_kombu.*``) live beside them in the same
database.

==============================================  =========  ===================================
key                                             type       holds
==============================================  =========  ===================================
``sub:{id}``                                    hash       the submission record (strings;
                                                           ``metadata``/``analyses`` as JSON;
                                                           a succeeded benchmark submission's
                                                           board entries as ``ranking``, JSON,
                                                           kept whatever its visibility)
``sub:{id}:arrays``                             hash       ``manifest`` (JSON: name -> blob
                                                           key, dtype, shape, codec ``npy``;
                                                           the arrays are in the blob store);
                                                           data of the previous codec: the
                                                           compressed chunks ``{name}:{i}``;
                                                           expires after the job, except for a
                                                           succeeded benchmark submission
``sub:{id}:result``                             string     the result document (JSON)
``sub:{id}:hb``                                 string     the heartbeat: the worker's name,
                                                           expires after ``heartbeat_ttl_s``
``sub:{id}:split``                              hash       a bootstrap split among workers:
                                                           ``token`` (the job's delivery),
                                                           ``spec`` (JSON: metrics, options,
                                                           the parts' resample ranges); with
                                                           the keys below, expires after the
                                                           job's hard time limit and is
                                                           deleted when the job ends
``sub:{id}:split:claim:{i}``                    string     who computes part i (expires after
                                                           ``heartbeat_ttl_s`` unless its
                                                           claimant keeps it alive)
``sub:{id}:split:values``                       hash       part i -> its bootstrap values
                                                           (zlib-compressed float64, one
                                                           array per metric)
``sub:{id}:split:notes``                        hash       part i -> JSON {by, reasons,
                                                           warnings}: who computed it and what
                                                           the resampling noted
``subs``                                        zset       every submission id, score =
                                                           creation time (newest first = REV)
``subs:owner:{key_id}``                         zset       the submissions of one API key
``subs:team:{team_id}``                         zset       the submissions of one team
``subs:ended:{status}``                         zset       submissions seen to have ended with
                                                           ``status`` (succeeded, failed,
                                                           cancelled; final), score = creation
                                                           time: filled as status listings
                                                           read them, left by a deletion
``subs:listing:{token}``                        zset       one listing's page being read
                                                           (exists only inside its MULTI)
``team:{team_id}``                              hash       TeamRecord fields
``teams``                                       zset       team ids, score = creation time
``bench:{id}``                                  string     the benchmark record (JSON)
``bench:{id}:arrays``                           hash       the hidden targets ``y``, or
                                                           ``labels`` (+ ``soft_labels``,
                                                           ``ood``), and ``groups``, stored
                                                           like ``sub:{id}:arrays``
``benchmarks``                                  zset       benchmark ids, score = creation
``bench:{id}:shares``                           hash       the board's share links: link id ->
                                                           JSON {token_hash, created_at}
``share:{sha256(token)}``                       string     JSON {link_id, bench_id,
                                                           created_at} of a share link's token
``quota:{bench}:{team_id}``                     zset       the team's submissions counted
                                                           against the benchmark's quota,
                                                           score = creation time (a job
                                                           failed by the system is removed)
``lb:{bench}:{board}:subs``                     zset       every ranked (succeeded, public)
                                                           submission, score = its badness
                                                           (value, −value or |value − best|
                                                           by the metric's direction)
``lb:{bench}:{board}:{rule}``                   zset       one entry per team (rule best or
                                                           latest), score = badness
``lb:{bench}:{board}:{rule}:sub``               hash       team -> the submission ranked
``lb:{bench}:{board}:entry``                    hash       submission -> JSON {value, low,
                                                           high, std} shown on the board
``lb:{bench}:info``                             hash       submission -> "team|created_ts";
                                                           ``__version``: counts board changes
``lb:{bench}:{board}:{rule}:ranks``             string     JSON: the rank distribution and
                                                           separability flags of the board at
                                                           one version (computed by a worker)
``lb:{bench}:{board}:{rule}:ranks-lock``        string     a queued/running rank job (expires)
``lb:{bench}:page:{query}``                     hash       a rendered leaderboard answer:
                                                           ``body`` (JSON or CSV bytes),
                                                           ``disposition`` (CSV), ``stamp``
                                                           (the state it shows: served only
                                                           while that state is current);
                                                           expires after a few minutes
``cmp:{id}``                                    hash       a comparison: id, owner, team,
                                                           status, times, error, ``request``
                                                           (JSON)
``cmp:{id}:result``                             string     the comparison's result (JSON)
``cmp:{id}:hb``                                 string     a running comparison's heartbeat:
                                                           its task delivery, expires after
                                                           ``heartbeat_ttl_s``
``cmps:running``                                zset       running comparison ids, score =
                                                           start time (the reaper's list)
``cmps:resend``                                 zset       re-queued comparison ids whose task
                                                           message is still to be published
``upload:{id}``                                  hash       a resumable upload in progress:
                                                           owner, size, part_size, parts,
                                                           sha256, content_type/encoding,
                                                           purpose, expires_at, ``part:{n}``
                                                           -> "{size}:{sha256}" per part
                                                           received, ``answer`` (JSON) once
                                                           completed, ``part_keys`` =
                                                           "sha256"; expires after
                                                           ``upload_ttl_s`` (parts: blob store
                                                           ``uploads/{id}/part-{n}-{sha256}``;
                                                           ``part-{n}`` for an upload without
                                                           ``part_keys``, made by an earlier
                                                           version)
``upload:{id}:completing``                       string     the lock of the one completion of
                                                           the upload running (a random token),
                                                           expires after its lease unless
                                                           renewed
``sub:{id}:plots``                               hash       rendered plots: ``{name}.{format}``
                                                           -> PNG/SVG bytes, or ``error:{status}:
                                                           {reason}`` (not applicable, failed);
                                                           expires after ``plot_cache_ttl_s``
``sub:{id}:curves``                              string     zlib-compressed JSON of every curve that
                                                           applies, written at job end (a
                                                           submission outside benchmarks, sent
                                                           without ``analyses.curves``): its curve
                                                           plots outlive the raw arrays. Now the
                                                           blob ``curves/{id}/curves.json.zz``;
                                                           this key (earlier versions) is still
                                                           read
``cmp:{id}:plots``                              hash       the same, of a comparison
``lb:{bench}:plots:{digest}``                   hash       the same, of one leaderboard answer
                                                           (``digest``: of its JSON bytes), and
                                                           ``source``: those bytes
``{plots key}:claim:{name}.{format}``           string     a queued render of that plot (one per
                                                           plot: concurrent misses queue one
                                                           task; expires)
``stats:plots``                                 string     plots rendered (a counter)
``rate:{key_id}:{window}``                      string     requests of a key in one window
                                                           (expires with the window)
``queued:{queue}``                              zset       queued ids per queue, score =
                                                           creation time (queue position)
``running``                                     zset       running ids, score = start time
``pending``                                     zset       stored but not yet enqueued ids,
                                                           score = store time (a crash between
                                                           the two steps is rolled back later)
``resend``                                      zset       re-queued ids whose task message is
                                                           still to be published
``idem:{key_id}:{sha256(Idempotency-Key)}``     string     JSON {"id", "body_hash"}
``apikey:{key_id}``                             hash       ApiKeyRecord fields + ``hash``
``apikey-hash:{sha256(token)}``                 string     key_id of the token's record
``apikeys``                                     zset       key ids, score = creation time
``admin-generated``                             string     set once an admin key was generated
``workers``                                     zset       worker name -> last seen (unix s)
``worker:{name}``                               string     JSON {queues, backend, device, pid}
                                                           (expires when the worker stops)
``blobs:due``                                   zset       blob prefixes (``submissions/{id}/``,
                                                           ``benchmarks/{id}/``) -> when the
                                                           blob sweep next looks at them
                                                           (:mod:`service.store.blobsweep`)
``blobs:sweep``                                 string     held by the worker sweeping blobs
                                                           (expires)
``blobs:reconcile``                             string     set when the blob store was last
                                                           listed for orphans (expires)
``stats``                                       hash       job counters (succeeded, failed,
                                                           cancelled, requeued)
``stats:duration:{queue}``                      hash       duration histogram: ``le:{bound}``
                                                           counts, ``sum`` and ``count``
==============================================  =========  ===================================

A ``{board}`` is a metric name, or ``metric[estimator]`` for a classification metric under an
estimator other than its own (:mod:`service.leaderboard`); the functions below take it as
their ``metric`` argument.
"""

from __future__ import annotations

PREFIX = "uqeval:v1:"

#: Upper bounds (seconds) of the job-duration histogram buckets (Prometheus ``le``).
DURATION_BUCKETS: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


def submission(sub_id: str) -> str:
    return f"{PREFIX}sub:{sub_id}"


def arrays(sub_id: str) -> str:
    return f"{PREFIX}sub:{sub_id}:arrays"


def result(sub_id: str) -> str:
    return f"{PREFIX}sub:{sub_id}:result"


def heartbeat(sub_id: str) -> str:
    return f"{PREFIX}sub:{sub_id}:hb"


def split(sub_id: str) -> str:
    return f"{PREFIX}sub:{sub_id}:split"


def split_claim(sub_id: str, part: int) -> str:
    return f"{PREFIX}sub:{sub_id}:split:claim:{part}"


def split_values(sub_id: str) -> str:
    return f"{PREFIX}sub:{sub_id}:split:values"


def split_notes(sub_id: str) -> str:
    return f"{PREFIX}sub:{sub_id}:split:notes"


def submissions() -> str:
    return f"{PREFIX}subs"


def owner_submissions(key_id: str) -> str:
    return f"{PREFIX}subs:owner:{key_id}"


def team_submissions(team_id: str) -> str:
    return f"{PREFIX}subs:team:{team_id}"


#: The final statuses: a submission that has one never changes it (its record may only be
#: deleted), which lets the listings index them once seen (:func:`ended`).
ENDED = ("succeeded", "failed", "cancelled")


def ended(status: str) -> str:
    """The submissions known to have ended with ``status`` (one of :data:`ENDED`)."""
    return f"{PREFIX}subs:ended:{status}"


def listing_scratch(token: str) -> str:
    """The intersection one listing computes, created and deleted in one transaction."""
    return f"{PREFIX}subs:listing:{token}"


def team(team_id: str) -> str:
    return f"{PREFIX}team:{team_id}"


def teams() -> str:
    return f"{PREFIX}teams"


def benchmark(bench_id: str) -> str:
    return f"{PREFIX}bench:{bench_id}"


def benchmark_arrays(bench_id: str) -> str:
    return f"{PREFIX}bench:{bench_id}:arrays"


def benchmarks() -> str:
    return f"{PREFIX}benchmarks"


def share_links(bench_id: str) -> str:
    return f"{PREFIX}bench:{bench_id}:shares"


def share_token(token_hash: str) -> str:
    return f"{PREFIX}share:{token_hash}"


def quota(bench_id: str, team_id: str) -> str:
    return f"{PREFIX}quota:{bench_id}:{team_id}"


def leaderboard_subs(bench_id: str, metric: str) -> str:
    return f"{PREFIX}lb:{bench_id}:{metric}:subs"


def leaderboard(bench_id: str, metric: str, rule: str) -> str:
    return f"{PREFIX}lb:{bench_id}:{metric}:{rule}"


def leaderboard_map(bench_id: str, metric: str, rule: str) -> str:
    return f"{PREFIX}lb:{bench_id}:{metric}:{rule}:sub"


def leaderboard_entries(bench_id: str, metric: str) -> str:
    return f"{PREFIX}lb:{bench_id}:{metric}:entry"


def leaderboard_info(bench_id: str) -> str:
    return f"{PREFIX}lb:{bench_id}:info"


def ranks(bench_id: str, metric: str, rule: str) -> str:
    return f"{PREFIX}lb:{bench_id}:{metric}:{rule}:ranks"


def ranks_lock(bench_id: str, metric: str, rule: str) -> str:
    return f"{PREFIX}lb:{bench_id}:{metric}:{rule}:ranks-lock"


def leaderboard_page_cache(bench_id: str, query: str) -> str:
    """A rendered answer of the leaderboard route; ``query``: a digest of its parameters (a
    hexadecimal digest, so never the name of a board's key)."""
    return f"{PREFIX}lb:{bench_id}:page:{query}"


def leaderboard_pattern(bench_id: str) -> str:
    """A SCAN pattern matching every leaderboard key of a benchmark."""
    return f"{PREFIX}lb:{bench_id}:*"


#: The ranking rules of a benchmark; both boards are kept, the benchmark's rule picks one.
RULES: tuple[str, ...] = ("best", "latest")


def comparison(cmp_id: str) -> str:
    return f"{PREFIX}cmp:{cmp_id}"


def comparison_result(cmp_id: str) -> str:
    return f"{PREFIX}cmp:{cmp_id}:result"


def comparison_heartbeat(cmp_id: str) -> str:
    return f"{PREFIX}cmp:{cmp_id}:hb"


def running_comparisons() -> str:
    return f"{PREFIX}cmps:running"


def resend_comparisons() -> str:
    return f"{PREFIX}cmps:resend"


def rate(key_id: str, window: int) -> str:
    return f"{PREFIX}rate:{key_id}:{window}"


def queued(queue: str) -> str:
    return f"{PREFIX}queued:{queue}"


def running() -> str:
    return f"{PREFIX}running"


def pending() -> str:
    return f"{PREFIX}pending"


def resend() -> str:
    return f"{PREFIX}resend"


def idempotency(key_id: str, key_hash: str) -> str:
    return f"{PREFIX}idem:{key_id}:{key_hash}"


def upload(upload_id: str) -> str:
    return f"{PREFIX}upload:{upload_id}"


def upload_completing(upload_id: str) -> str:
    return f"{PREFIX}upload:{upload_id}:completing"


def api_key(key_id: str) -> str:
    return f"{PREFIX}apikey:{key_id}"


def api_key_hash(token_hash: str) -> str:
    return f"{PREFIX}apikey-hash:{token_hash}"


def api_key_auth(token_hash: str) -> str:
    """A copy of the key record under the token's hash: authentication in one HGETALL."""
    return f"{PREFIX}apikey-auth:{token_hash}"


def api_keys() -> str:
    return f"{PREFIX}apikeys"


def admin_generated() -> str:
    return f"{PREFIX}admin-generated"


def workers() -> str:
    return f"{PREFIX}workers"


def worker(name: str) -> str:
    return f"{PREFIX}worker:{name}"


def stats() -> str:
    return f"{PREFIX}stats"


def durations(queue: str) -> str:
    return f"{PREFIX}stats:duration:{queue}"


QUEUES: tuple[str, ...] = ("cpu", "gpu")


def submission_plots(sub_id: str) -> str:
    return f"{PREFIX}sub:{sub_id}:plots"


def submission_curves(sub_id: str) -> str:
    """The curves its curve plots are drawn from (zlib-compressed JSON), kept with the
    submission: written at job end, so plots outlive the raw arrays."""
    return f"{PREFIX}sub:{sub_id}:curves"


def comparison_plots(cmp_id: str) -> str:
    return f"{PREFIX}cmp:{cmp_id}:plots"


def leaderboard_plots(bench_id: str, digest: str) -> str:
    """The plots of one leaderboard answer; ``digest``: a hexadecimal digest of its bytes."""
    return f"{PREFIX}lb:{bench_id}:plots:{digest}"


def plot_claim(plots_key: str, field: str) -> str:
    """The claim of a queued render of ``field`` (``{name}.{format}``) of ``plots_key``."""
    return f"{plots_key}:claim:{field}"


def plot_renders() -> str:
    return f"{PREFIX}stats:plots"


def blobs_due() -> str:
    return f"{PREFIX}blobs:due"


def blobs_sweep_lock() -> str:
    return f"{PREFIX}blobs:sweep"


def blobs_reconcile_lock() -> str:
    return f"{PREFIX}blobs:reconcile"


def submission_blobs(sub_id: str) -> str:
    """The blob-store prefix of a submission's arrays (not a Redis key)."""
    return f"submissions/{sub_id}/"


def benchmark_blobs(bench_id: str) -> str:
    """The blob-store prefix of a benchmark's arrays (not a Redis key)."""
    return f"benchmarks/{bench_id}/"


def curves_blobs(sub_id: str) -> str:
    """The blob-store prefix of a submission's kept curves (not a Redis key): they live as
    long as the submission, past its arrays."""
    return f"curves/{sub_id}/"


# --- notifications (webhooks): see service.store.notifications ---------------------------------


def webhook_secret(key_id: str) -> str:
    """Hash {secret, created_at}: the webhook signing secret of an API key (kept in clear:
    the worker signs with it)."""
    return f"{PREFIX}webhook-secret:{key_id}"


def deliveries(scope: str, ident: str) -> str:
    """List of the delivery ids of a submission or comparison (``scope``), newest first."""
    return f"{PREFIX}deliveries:{scope}:{ident}"


def delivery(delivery_id: str) -> str:
    """Hash: one webhook delivery (its event, target, state and counters)."""
    return f"{PREFIX}delivery:{delivery_id}"


def delivery_attempts(delivery_id: str) -> str:
    """List of JSON attempts of one delivery (time, status code or error, duration), bounded."""
    return f"{PREFIX}delivery:{delivery_id}:attempts"


def delivery_lock(delivery_id: str) -> str:
    """String held by the task sending one delivery (expires)."""
    return f"{PREFIX}delivery:{delivery_id}:lock"


def ended_delivery(scope: str, ident: str) -> str:
    """String: the id of the delivery opened when a submission or comparison ended (set once,
    so that every path that ends a job may call the hook)."""
    return f"{PREFIX}ended:{scope}:{ident}"


def deliveries_due() -> str:
    """Zset: pending delivery ids -> when their next attempt is due (the reaper publishes a
    task again for those long overdue)."""
    return f"{PREFIX}deliveries:due"


# Public/private split of benchmarks and final submissions.


def private_result(sub_id: str) -> str:
    """The sealed result of a benchmark submission on its benchmark's private rows (read by
    no route while the benchmark is open)."""
    return f"{PREFIX}sub:{sub_id}:private"


def finals(bench_id: str, team: str) -> str:
    """The set of submissions a team marked final on a benchmark."""
    return f"{PREFIX}bench:{bench_id}:finals:{team}"


def finals_pattern(bench_id: str) -> str:
    return f"{PREFIX}bench:{bench_id}:finals:*"


def bench_submissions(bench_id: str) -> str:
    """Sorted set of a benchmark's submissions by creation time, written with the submission
    (the candidates of the default finals, filtered by status when read: indexing them when
    they succeed, after the finish script, lost any whose worker died in between)."""
    return f"{PREFIX}bench:{bench_id}:subs"


def bench_succeeded_legacy(bench_id: str) -> str:
    """The index of earlier versions: the benchmark's submissions that had succeeded, written
    after each job; read beside :func:`bench_submissions` for the submissions stored then."""
    return f"{PREFIX}bench:{bench_id}:succeeded"


# --- benchmark suites ----------------------------------------------------------------------


def suite(suite_id: str) -> str:
    return f"{PREFIX}suite:{suite_id}"


def suites() -> str:
    """Sorted set of suite ids by creation time."""
    return f"{PREFIX}suites"


def suite_intervals(suite_id: str) -> str:
    """The interval document of a suite's leaderboard (both views), written by its job."""
    return f"{PREFIX}suite:{suite_id}:intervals"


def suite_intervals_lock(suite_id: str) -> str:
    """The claim of a queued interval job of a suite."""
    return f"{PREFIX}suite:{suite_id}:intervals-lock"


def suite_page_cache(suite_id: str, query: str) -> str:
    """A rendered answer of the suite leaderboard route; ``query``: a digest of its
    parameters."""
    return f"{PREFIX}suite:{suite_id}:page:{query}"
