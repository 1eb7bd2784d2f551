"""A walkthrough of uq-eval on real data: models trained here, judged by the service.

It trains small models on two datasets that ship inside scikit-learn (no download) —
``load_diabetes`` (regression) and ``load_digits`` (classification) — starts a server (or uses
one), registers one benchmark per dataset whose targets (the test split) stay on the server,
gives each model team its own key, submits every model with :class:`uqeval.Client`, waits with
a progress line, prints the leaderboards with their bootstrap and rank intervals and a paired
comparison, and checks the point of the exercise: a deliberately over-confident model — the
same point predictions with a narrower spread — loses on calibration, clearly (the paired
interval excludes 0), and not on accuracy (identical, difference exactly 0).

Run it from the repository root::

    python examples/walkthrough.py                       # starts `uqeval serve` itself
    python examples/walkthrough.py --url URL --key KEY   # an existing server (admin key)

``UQEVAL_URL`` / ``UQEVAL_KEY`` work instead of the flags. The exit code is 0 when every check
holds, 1 when one does not (each failure printed). Every random draw is seeded.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from uqeval import Client
from uqeval.errors import UQEvalError

SEED = 0
#: The over-confident models divide their spread by this (std / 4; temperature 1/4).
SHARPEN = 4.0
BOOTSTRAP = 1000  # resamples of every leaderboard interval and of the comparison
LEVEL = 0.95

TEAMS = ("Bootstrappers", "Quantile Crew", "Linear Lab", "Sharp & Sure")


@dataclass
class Model:
    """One submission: the team that sends it, its name and its named arrays (as in the API)."""

    team: str
    name: str
    kind: str
    arrays: dict[str, np.ndarray]
    about: str
    submission_id: str = ""
    result: Any = None


@dataclass
class Task:
    """A dataset's benchmark: hidden targets, the models, and what the checks compare."""

    dataset: str
    task: str
    targets: np.ndarray
    models: list[Model]
    metrics: list[str]  # the benchmark's; the first is its primary metric
    accuracy_metric: str  # where the over-confident twin must not lose
    calibration_metrics: tuple[str, ...]  # where it must lose
    calibrated: str  # the model name of the well-calibrated reference ...
    overconfident: str  # ... and of its over-confident twin
    benchmark_id: str = ""


# ---------------------------------------------------------------------------------------------
# The models (scikit-learn; all seeded)


def regression_task() -> Task:
    """Diabetes (442 patients, 10 features): four regression models of disease progression."""
    from sklearn.datasets import load_diabetes
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import train_test_split

    x, y = load_diabetes(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.4, random_state=SEED)
    rng = np.random.default_rng(SEED)
    n = len(y_train)

    def gbm(**kw: Any) -> GradientBoostingRegressor:
        return GradientBoostingRegressor(
            n_estimators=100, max_depth=2, learning_rate=0.05, random_state=SEED, **kw
        )

    # A bootstrap ensemble: 16 boosted-tree members, each fit on a resample of the training
    # rows. The noise std comes from the out-of-bag residuals (each row predicted only by the
    # members that did not see it), so it is an honest estimate of the error on new rows.
    members = 16
    means = np.empty((len(y_test), members))
    oob_sum, oob_count = np.zeros(n), np.zeros(n)
    for m in range(members):
        rows = rng.integers(0, n, n)
        fit = gbm().fit(x_train[rows], y_train[rows])
        out = np.setdiff1d(np.arange(n), rows)
        oob_sum[out] += fit.predict(x_train[out])
        oob_count[out] += 1
        means[:, m] = fit.predict(x_test)
    seen = oob_count > 0
    noise = float(np.std(y_train[seen] - oob_sum[seen] / oob_count[seen]))
    ensemble = Model(
        "Bootstrappers",
        f"gbm-bootstrap-{members}",
        "mixture",
        {
            "weights": np.full(means.shape, 1.0 / members),
            "means": means,
            "stds": np.full(means.shape, noise),
        },
        f"{members} boosted-tree members on bootstrap resamples, a Gaussian mixture "
        f"(out-of-bag noise std {noise:.1f})",
    )

    # Quantile regression at ten evenly spaced levels (a midpoint rule, so that the CRPS of
    # the quantiles approximates the integral well). Separately fit quantiles can cross;
    # sorting each row (rearrangement) is the standard remedy and never makes them worse.
    levels = np.linspace(0.05, 0.95, 10)
    values = np.column_stack(
        [gbm(loss="quantile", alpha=a).fit(x_train, y_train).predict(x_test) for a in levels]
    )
    quantiles = Model(
        "Quantile Crew",
        "gbm-quantiles-10",
        "quantiles",
        {"levels": levels, "values": np.sort(values, axis=1)},
        "boosted trees with the pinball loss at 10 levels, 0.05 … 0.95",
    )

    # The homoscedastic baseline: ridge regression with one std for every row, the std of its
    # residuals on rows held out from its fit.
    x_fit, x_val, y_fit, y_val = train_test_split(
        x_train, y_train, test_size=0.25, random_state=SEED
    )
    ridge = Ridge(alpha=0.1).fit(x_fit, y_fit)
    std = float(np.std(y_val - ridge.predict(x_val)))
    mean = ridge.predict(x_test)
    baseline = Model(
        "Linear Lab",
        "ridge-homoscedastic",
        "gaussian",
        {"mean": mean, "std": np.full(len(y_test), std)},
        f"ridge regression, one std from held-out residuals ({std:.1f})",
    )
    # Its over-confident twin: the same means, the std divided by SHARPEN.
    sharp = Model(
        "Sharp & Sure",
        f"ridge-std/{SHARPEN:g}",
        "gaussian",
        {"mean": mean.copy(), "std": np.full(len(y_test), std / SHARPEN)},
        f"the same ridge means, std / {SHARPEN:g} (over-confident)",
    )
    return Task(
        "diabetes",
        "regression",
        y_test,
        [ensemble, quantiles, baseline, sharp],
        metrics=["crps", "mae", "nll", "ece"],
        accuracy_metric="mae",
        calibration_metrics=("ece", "nll", "crps"),
        calibrated=baseline.name,
        overconfident=sharp.name,
    )


def classification_task() -> Task:
    """Digits (1797 8×8 images, 10 classes): three classifiers trained on 300 images."""
    from scipy.optimize import minimize_scalar
    from scipy.special import log_softmax, logsumexp
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    x, labels = load_digits(return_X_y=True)
    x = x / 16.0  # pixel intensities 0..16
    # Few training images, so that the models make mistakes (~7%) and calibration matters.
    x_train, x_rest, l_train, l_rest = train_test_split(
        x, labels, train_size=300, random_state=SEED, stratify=labels
    )
    x_val, x_test, l_val, l_test = train_test_split(
        x_rest, l_rest, train_size=300, random_state=SEED, stratify=l_rest
    )
    rng = np.random.default_rng(SEED)

    def logreg(c: float = 1.0) -> LogisticRegression:
        return LogisticRegression(C=c, max_iter=1000)

    # A deep-ensemble-like set: 8 logistic regressions on bootstrap resamples, then one
    # temperature for all members chosen on the validation images (minimum NLL of the
    # averaged probabilities): the usual recipe for a calibrated ensemble.
    members = 8
    val_logp, test_logp = [], []
    for _ in range(members):
        rows = rng.integers(0, len(l_train), len(l_train))
        while len(np.unique(l_train[rows])) < 10:  # every class in every member
            rows = rng.integers(0, len(l_train), len(l_train))
        fit = logreg().fit(x_train[rows], l_train[rows])
        val_logp.append(fit.predict_log_proba(x_val))
        test_logp.append(fit.predict_log_proba(x_test))
    val_l, test_l = np.array(val_logp), np.array(test_logp)

    def nll(t: float) -> float:
        avg = logsumexp(log_softmax(val_l / t, axis=2), axis=0) - np.log(members)
        return float(-np.mean(avg[np.arange(len(l_val)), l_val]))

    temperature = float(minimize_scalar(nll, bounds=(0.05, 20.0), method="bounded").x)
    member_probs = np.exp(log_softmax(test_l / temperature, axis=2))
    ensemble = Model(
        "Bootstrappers",
        f"logreg-bootstrap-{members}",
        "ensemble",
        {"member_probs": member_probs},
        f"{members} logistic regressions on bootstrap resamples, temperature "
        f"{temperature:.2f} fit on validation images",
    )
    single = Model(
        "Linear Lab",
        "logreg-single",
        "probs",
        {"probs": logreg(3.0).fit(x_train, l_train).predict_proba(x_test)},
        "one logistic regression (C = 3) on all training images, not recalibrated",
    )
    # The over-confident twin: the ensemble's averaged probabilities, sharpened (temperature
    # 1/SHARPEN on their logarithms). Sharpening keeps every row's most probable class, so the
    # predicted classes — and the accuracy — are exactly the ensemble's.
    log_bma = np.log(member_probs.mean(axis=0))
    sharpened = log_bma * SHARPEN
    assert np.array_equal(np.argmax(sharpened, axis=1), np.argmax(log_bma, axis=1))
    sharp = Model(
        "Sharp & Sure",
        f"logreg-bootstrap-{members}-T1/{SHARPEN:g}",
        "logits",
        {"logits": sharpened},
        f"the ensemble's averaged probabilities at temperature 1/{SHARPEN:g} (over-confident)",
    )
    return Task(
        "digits",
        "classification",
        l_test,
        [ensemble, single, sharp],
        metrics=["nll", "accuracy", "ece", "brier"],
        accuracy_metric="accuracy",
        calibration_metrics=("ece", "nll"),
        calibrated=ensemble.name,
        overconfident=sharp.name,
    )


# ---------------------------------------------------------------------------------------------
# The server


class LocalServer:
    """``uqeval serve --port 0`` in a temporary data directory, as a context manager.

    It starts at once and :attr:`url` waits for its banner, so that the models train while the
    server boots. Leaving the block stops it — SIGTERM, which stops the API, the worker and
    Redis in order — also on an error or Ctrl-C.
    """

    def __init__(self, admin_key: str, timeout_s: float = 120.0) -> None:
        self.admin_key = admin_key
        self.timeout_s = timeout_s
        self.lines: list[str] = []
        self._ready = threading.Event()
        self._dir = tempfile.TemporaryDirectory(prefix="uqeval-walkthrough-")
        self._url: str | None = None

    def __enter__(self) -> LocalServer:
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "UQEVAL_REDIS_URL")}
        env["UQEVAL_ADMIN_KEY"] = self.admin_key
        env.setdefault("UQEVAL_BACKEND", "numpy")  # small data: no GPU library to probe
        cmd = [sys.executable, "-m", "uqeval", "serve", "--port", "0"]
        self.proc = subprocess.Popen(
            [*cmd, "--data-dir", self._dir.name],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # a Ctrl-C reaches this script only, which stops it in order
        )
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        return self

    def _drain(self) -> None:
        # Read every line, so that the server never blocks on a full pipe.
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())
            if m := re.match(r"uq-eval is running at (\S+)", line):
                self._url = m.group(1)
            if line.startswith("Press Ctrl-C"):
                self._ready.set()
        self._ready.set()  # it exited

    @property
    def url(self) -> str:
        if (
            not self._ready.wait(self.timeout_s)
            or self._url is None
            or self.proc.poll() is not None
        ):
            raise RuntimeError("uqeval serve did not start:\n" + "\n".join(self.lines))
        return self._url

    def __exit__(self, *exc: object) -> None:
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(timeout=10)
            self._reader.join(timeout=5)
        finally:
            self._dir.cleanup()


# ---------------------------------------------------------------------------------------------
# The story


def fmt(x: float | None, digits: int = 4) -> str:
    return "—" if x is None else f"{x:.{digits}g}"


def progress_line(model: str) -> Callable[[Any], None]:
    """A progress callback for ``Client.wait``: one line per change of status or percent."""

    def show(sub: Any) -> None:
        print(f"    {model:<28} {sub.status:<9} {sub.progress:5.1f}%", flush=True)

    return show


def set_up(admin: Client, url: str, tasks: list[Task]) -> dict[str, Client]:
    """Register the benchmarks (hidden targets) and one team with a submitter key per team."""
    for task in tasks:
        targets = {"y": task.targets} if task.task == "regression" else {"labels": task.targets}
        extra = {"n_classes": 10} if task.task == "classification" else {}
        bench = admin.create_benchmark(
            f"{task.dataset}-walkthrough",
            task=task.task,
            primary_metric=task.metrics[0],
            metrics=task.metrics,
            bootstrap={"n_resamples": BOOTSTRAP, "level": LEVEL},
            seed=SEED,
            description=f"scikit-learn's {task.dataset}, test split (hidden)",
            **targets,
            **extra,
        )
        task.benchmark_id = bench.id
        print(f"  benchmark {bench.id}: {task.dataset} ({task.task}), n = {bench.n} hidden targets")
    clients = {}
    for name in TEAMS:
        team = admin.create_team(name)
        key = admin.create_key(f"{name} key", team_id=team.team_id)
        clients[name] = Client(url, key.key)
        print(f"  team {name!r}: {team.team_id}, submitter key {key.key_id}")
    return clients


def submit_and_wait(task: Task, clients: Mapping[str, Client]) -> None:
    """Every model of the task as a public benchmark submission of its team, then wait."""
    for model in task.models:
        sub = clients[model.team].submit(
            model.arrays,
            kind=model.kind,
            benchmark=task.benchmark_id,
            model_name=model.name,
            metadata={"dataset": task.dataset, "about": model.about},
            visibility="public",
        )
        model.submission_id = sub.id
        print(f"  {model.team:<14} submitted {model.name} ({model.kind}): {sub.id}")
    print("  waiting (one worker evaluates them in turn):")
    for model in task.models:
        done = clients[model.team].wait(
            model.submission_id, progress=progress_line(model.name), timeout=120
        )
        model.result = done.result


def show_leaderboard(admin: Client, task: Task, metric: str) -> Any:
    """Print the leaderboard of ``metric`` once its rank intervals are computed."""
    deadline = time.monotonic() + 60
    while True:
        board = admin.leaderboard(task.benchmark_id, metric=metric)
        if board.ranks.get("status") == "current" or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    print(
        f"\n  Leaderboard {task.dataset} · {metric} ({board.direction} is better; "
        f"{LEVEL:.0%} bootstrap interval, B = {BOOTSTRAP}; rank interval; ranks "
        f"{board.ranks.get('status')})"
    )
    print(f"    {'rank':>4}  {'team':<17} {'model':<28} {'value':>9}  {'interval':<21} ranks")
    for e in board.entries:
        team = e.team_name or e.team_id
        interval = f"[{fmt(e.low)}, {fmt(e.high)}]"
        ranks = "—" if e.rank_low is None else f"{e.rank_low}–{e.rank_high}"
        print(
            f"    {e.rank:>4}  {team:<17} {e.model_name:<28} {fmt(e.value):>9}  "
            f"{interval:<21} {ranks}"
        )
    return board


def show_comparison(client: Client, task: Task, metrics: list[str]) -> dict[str, Any]:
    """The paired bootstrap comparison calibrated − over-confident; returns metric -> entry."""
    by_name = {m.name: m for m in task.models}
    a, b = by_name[task.calibrated], by_name[task.overconfident]
    cmp = client.compare(
        [a.submission_id, b.submission_id],
        benchmark=task.benchmark_id,
        metrics=metrics,
        n_resamples=BOOTSTRAP,
        seed=SEED,
        level=LEVEL,
        wait=True,
        timeout=120,
    )
    pairs = (cmp.result or {}).get("pairs", [])  # wait=True: it succeeded, or raised
    pair = next(p for p in pairs if {p["a"], p["b"]} == {a.submission_id, b.submission_id})
    sign = 1.0 if pair["a"] == a.submission_id else -1.0  # report as calibrated − over-confident
    print(
        f"\n  Paired comparison ({cmp.id}): {a.name} − {b.name}, the same {len(task.targets)} "
        f"rows resampled together (B = {BOOTSTRAP})"
    )
    out = {}
    for name in metrics:
        d = pair["metrics"][name]
        diff, low, high = (sign * d["diff"], *sorted((sign * d["low"], sign * d["high"])))
        out[name] = {"diff": diff, "low": low, "high": high}
        print(
            f"    {name:<9} difference {diff:+.4g}  [{low:+.4g}, {high:+.4g}]  "
            f"p = {d['p_value']:.3g}"
        )
    return out


class Checks:
    """Each check printed as it is made; the failures kept for the exit code."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.dataset = ""

    def expect(self, ok: bool, what: str) -> None:
        print(f"    [{'ok' if ok else 'FAILED'}] {what}", flush=True)
        if not ok:
            self.failures.append(f"{self.dataset}: {what}")


def check_story(
    task: Task, boards: Mapping[str, Any], diffs: Mapping[str, Any], checks: Checks
) -> None:
    """The over-confident twin loses where it should (calibration, and the proper scores
    that reward it) and not where it should not (accuracy)."""
    by_name = {m.name: m for m in task.models}
    good, bad = by_name[task.calibrated], by_name[task.overconfident]
    print(f"\n  Checks: {bad.name} against {good.name}")
    acc = task.accuracy_metric
    board = {e.model_name: e.value for e in boards[acc].entries}
    checks.expect(
        board.get(good.name) is not None and board.get(good.name) == board.get(bad.name),
        f"{acc}: the same value on the leaderboard ({fmt(board.get(good.name))} and "
        f"{fmt(board.get(bad.name))})",
    )
    d = diffs[acc]
    checks.expect(
        d["diff"] == 0 and d["low"] <= 0 <= d["high"],
        f"{acc}: paired difference exactly 0, its interval [{d['low']:+.4g}, {d['high']:+.4g}] "
        "contains 0",
    )
    for metric in task.calibration_metrics:  # lower is better for each of them
        v_good, v_bad = good.result.value(metric), bad.result.value(metric)
        checks.expect(
            v_good is not None and v_bad is not None and v_bad > v_good,
            f"{metric}: worse for the over-confident model ({fmt(v_bad)} > {fmt(v_good)})",
        )
        d = diffs[metric]
        checks.expect(
            d["high"] < 0,
            f"{metric}: paired interval of the difference [{d['low']:+.4g}, {d['high']:+.4g}] "
            "excludes 0",
        )


def check_locally(task: Task, checks: Checks) -> None:
    """The server's values against uqcore run here on the same arrays and targets (a
    double check only: everything printed above comes from the server)."""
    from uqcore import evaluate
    from uqcore import predictions as P

    build = {
        "gaussian": P.Gaussian,
        "mixture": P.Mixture,
        "quantiles": P.Quantiles,
        "ensemble": P.Ensemble,
        "probs": P.Probs,
        "logits": P.Logits,
    }
    compared, off = 0, []
    for model in task.models:
        names = [n for n, mv in model.result.metrics.items() if mv.value is not None]
        local = evaluate(build[model.kind](**model.arrays), task.targets, metrics=names)
        for name in names:
            got, want = model.result.value(name), local.to_dict()["values"][name]
            compared += 1
            if not abs(got - want) <= 1e-9 * max(1.0, abs(want)):
                off.append(f"{model.name} {name}: {got!r} != {want!r}")
    checks.expect(
        compared > 0 and not off,
        f"the server's {compared} values equal uqcore's here" + "".join(f"; {o}" for o in off),
    )


def train() -> list[Task]:
    t0 = time.perf_counter()
    print("Training the models ...", flush=True)
    tasks = [regression_task(), classification_task()]
    for task in tasks:
        for m in task.models:
            print(f"  {task.dataset:<8} {m.team:<14} {m.name:<28} {m.about}")
    print(f"  ({time.perf_counter() - t0:.1f} s)")
    return tasks


def run(url: str, admin_key: str, tasks: list[Task]) -> list[str]:
    checks = Checks()
    with Client(url, admin_key) as admin:
        print(f"\nServer {url}: registering benchmarks and teams", flush=True)
        clients = set_up(admin, url, tasks)
        try:
            for task in tasks:
                print(f"\n== {task.dataset}: submitting {len(task.models)} models", flush=True)
                submit_and_wait(task, clients)
                shown = [task.accuracy_metric, "ece"]
                boards = {m: show_leaderboard(admin, task, m) for m in shown}
                # Public submissions: any key may compare them; here the calibrated team's.
                team = next(m.team for m in task.models if m.name == task.calibrated)
                metrics = [task.accuracy_metric, *task.calibration_metrics]
                diffs = show_comparison(clients[team], task, metrics)
                checks.dataset = task.dataset
                check_story(task, boards, diffs, checks)
                check_locally(task, checks)
        finally:
            for c in clients.values():
                c.close()
    return checks.failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("UQEVAL_URL"), help="existing server")
    parser.add_argument("--key", default=os.environ.get("UQEVAL_KEY"), help="its admin key")
    args = parser.parse_args(argv)
    if args.url and not args.key:
        parser.error("--url needs --key (an admin key), or UQEVAL_KEY")
    t0 = time.perf_counter()
    try:
        if args.url:
            failures = run(args.url, args.key, train())
        else:
            admin_key = secrets.token_urlsafe(24)
            print("Starting uqeval serve (in the background) ...", flush=True)
            with LocalServer(admin_key) as server:
                tasks = train()
                failures = run(server.url, admin_key, tasks)
    except (UQEvalError, RuntimeError, TimeoutError) as exc:
        # The server's answer (or why there was none), without a traceback; the exit code 1
        # as for a failed check.
        print(f"\nwalkthrough: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print()
    if failures:
        for f in failures:
            print(f"CHECK FAILED: {f}")
        print(f"walkthrough: {len(failures)} check(s) failed ({time.perf_counter() - t0:.1f} s)")
        return 1
    print(
        "OK: the over-confident models lose on calibration (intervals exclude 0) and tie on "
        f"accuracy (difference exactly 0); walkthrough done in {time.perf_counter() - t0:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
