"""Distance to the floor: uqcore's ``evaluate`` against the work no implementation can skip.

Run from the repository root:

    python benchmarks/floor.py            # N = 10^4, 10^5, 10^7 (about 3 minutes on 2 busy cores)
    python benchmarks/floor.py --quick    # N = 10^4, 10^5, 10^6

Writes the "Distance to the floor (uqcore)" section of ``benchmarks/RESULTS.md``.

The floor of ``evaluate`` with the regression metrics of a Gaussian it was set for (adversarial
group calibration and the metrics added since, :data:`ADDED_LATER`, excepted) is two argsorts (the ranking metrics order rows by uncertainty, and
Spearman's ρ orders the errors), one sort (the PIT values), Φ, exp and log over N values (PIT
and CRPS, the CRPS density, the NLL's log σ) and one read of the three inputs. Each part is
timed on its own, in alternation with ``evaluate`` on the same arrays in the same run (medians
of the repetitions, as in ``benchmarks/regression.py``), and the floor is their sum. The
same parts with uqcore's radix sort in place of numpy's sorts (what ``evaluate`` runs up to
``RADIX_SORT_MAX`` rows) give a second floor, this implementation's own. The KS
p-value of ``pit`` and the ``mae``/``rmse`` floors (one numpy expression each) are timed the
same way.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy
import scipy.special as sps
import scipy.stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import uqcore
from benchmarks._results import write_section
from benchmarks.regression import (
    Targets,
    emit,
    fmt_s,
    gaussian_batch,
    machine,
    medians,
    p10,
    quiet,
    regression_metric_names,
)
from uqcore import evaluate, metric
from uqcore import predictions as P
from uqcore._backend import RADIX_SORT_MAX, radix_argsort, radix_sort
from uqcore._kolmogorov import ks_sf

SECTION = "Distance to the floor (uqcore)"
#: Regression metrics added after this floor and its targets were set (score decompositions,
#: interval metrics, skill scores): each has its own work beyond the floor (23 quantiles per
#: row for WIS, an argsort of the means and a PAV pass for CORP, the widths' statistics) and
#: its own target, against one sort, in the sections written with ``--against-sort`` by
#: ``benchmarks/regression.py``. ``evaluate`` is timed without them (the targets) and with
#: them (every regression metric of a Gaussian, for information).
ADDED_LATER = (
    "corp_dsc",
    "corp_mcb",
    "corp_unc",
    "coverage_pvalue",
    "cwc",
    "hsic_width_coverage",
    "size_stratified_coverage",
    "wis",
    "wis_dispersion",
    "wis_overprediction",
    "wis_underprediction",
    "check_score_skill",
    "crps_skill",
    "interval_score_skill",
    "nll_skill",
)


def floor_parts(mu: Any, sd: Any, y: Any) -> dict[str, Callable[[], Any]]:
    """The floor's parts on the batch's own arrays (inputs of each part made beforehand)."""
    e = np.abs(y - mu)
    z = (y - mu) / sd
    u = sps.ndtr(z)
    return {
        "argsort σ": lambda: np.argsort(sd),
        "argsort |e|": lambda: np.argsort(e),
        "sort PIT": lambda: np.sort(u),
        "Φ": lambda: sps.ndtr(z),
        "exp": lambda: np.exp(z),
        "log": lambda: np.log(sd),
        "read inputs": lambda: (np.sum(mu), np.sum(sd), np.sum(y)),
    }


#: Each numpy sort of the floor and the radix sort that replaces it in the second floor.
RADIX_PART = {
    "argsort σ": "radix argsort σ",
    "argsort |e|": "radix argsort |e|",
    "sort PIT": "radix sort PIT",
}


def radix_parts(mu: Any, sd: Any, y: Any) -> dict[str, Callable[[], Any]]:
    """The floor's three sorts done by uqcore's radix sort (:func:`uqcore._backend.radix_argsort`,
    order and sorted values in one; :func:`~uqcore._backend.radix_sort`, values only), as
    ``evaluate`` does them up to :data:`~uqcore._backend.RADIX_SORT_MAX` rows."""
    e = np.abs(y - mu)
    u = sps.ndtr((y - mu) / sd)
    return {
        "radix argsort σ": lambda: radix_argsort(np, sd),
        "radix argsort |e|": lambda: radix_argsort(np, e),
        "radix sort PIT": lambda: radix_sort(np, u),
    }


def bench_evaluate(sizes: list[int], tg: Targets) -> list[str]:
    lines = [
        "### `evaluate` against its floor",
        "",
        "`evaluate(prediction, y, metrics=names)` with the regression metrics of a Gaussian "
        "the floor was set for: all but `adversarial_group_calibration` and the "
        f"{len(ADDED_LATER)} added since (`{'`, `'.join(ADDED_LATER)}`; their targets are in "
        "the sections against one sort); the floor's parts timed in the same run, in "
        "alternation with it (medians of 7 repetitions, 3 at N = 10^7). The last two columns: "
        "`evaluate` of every regression metric of a Gaussian but group calibration, "
        "for information.",
        "",
        "| N | `evaluate` | floor (sum) | argsort σ | argsort abs(e) | sort PIT | Φ | exp | log "
        "| read inputs | `evaluate` / floor | `evaluate` / two argsorts | all metrics "
        "| all / two argsorts |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    own = [
        "",
        "The same `evaluate`, against the floor with uqcore's own sorts in place of numpy's: up to "
        f"{RADIX_SORT_MAX:,} rows `evaluate` orders and sorts by a radix sort "
        "(`uqcore._jit.radix_sort`: the ascending order and the sorted values in one O(N) pass "
        "per digit, 2–5× numpy's `argsort` + `take` and 3–4× its `sort` on some CPUs), so it can run "
        "below the floor above, which is defined with numpy's comparison sorts. This is the "
        "distance to the floor of this implementation (same run, same repetitions):",
        "",
        "| N | radix argsort σ | radix argsort abs(e) | radix sort PIT | floor with them "
        "| `evaluate` / it |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        mu, sd, y = gaussian_batch(n, seed=2)
        pred = P.Gaussian(mu, sd)
        every = regression_metric_names(pred, exclude=("adversarial_group_calibration",))
        names = [m for m in every if m not in ADDED_LATER]
        fns: dict[str, Callable[[], Any]] = {
            "evaluate": quiet(lambda pred=pred, y=y, names=names: evaluate(pred, y, metrics=names)),
            "all": quiet(lambda pred=pred, y=y, names=every: evaluate(pred, y, metrics=names)),
        }
        parts = floor_parts(mu, sd, y)
        fns.update(parts)
        radix = radix_parts(mu, sd, y)
        fns.update(radix)
        reps = 3 if n >= 10**7 else 7
        t = medians(fns, dict.fromkeys(fns, reps))
        floor = sum(t[k] for k in parts)
        sorts = t["argsort σ"] + t["argsort |e|"]
        ratio, ratio_sorts = t["evaluate"] / floor, t["evaluate"] / sorts
        cells = " | ".join(fmt_s(t[k]) for k in parts)
        emit(
            lines,
            f"| {p10(n)} | {fmt_s(t['evaluate'])} | {fmt_s(floor)} | {cells} | {ratio:.2f} "
            f"| {ratio_sorts:.2f} | {fmt_s(t['all'])} ({len(every)}) | {t['all'] / sorts:.2f} |",
        )
        floor_own = sum(t[RADIX_PART.get(k, k)] for k in parts)
        emit(
            own,
            f"| {p10(n)} | {' | '.join(fmt_s(t[k]) for k in radix)} | {fmt_s(floor_own)} "
            f"| {t['evaluate'] / floor_own:.2f} |",
        )
        if n >= 10**7:
            tg.add(f"`evaluate` at N = {p10(n)}", "≤ 1.3 × floor", f"{ratio:.2f} ×", ratio <= 1.3)
        elif n in (10**4, 10**5):
            tg.add(
                f"`evaluate` at N = {p10(n)}",
                "≤ 5 × two argsorts",
                f"{ratio_sorts:.2f} ×",
                ratio_sorts <= 5,
            )
    return [*lines, *own]


def bench_ks(n: int) -> list[str]:
    mu, sd, y = gaussian_batch(n, seed=2)
    d = float(metric("pit", P.Gaussian(mu, sd), y)["value"])
    t = medians(
        {"ks_sf": lambda: ks_sf(d, n), "scipy": lambda: scipy.stats.kstwo.sf(d, n)},
        {"ks_sf": 7, "scipy": 7},
    )
    lines = [
        f"### The KS p-value of `pit` at N = {p10(n)}",
        "",
        f"D = {d:.5f} (n·D² = {n * d * d:.2f}) on the batch above: `uqcore._kolmogorov.ks_sf` "
        f"{fmt_s(t['ks_sf'])}, `scipy.stats.kstwo.sf` {fmt_s(t['scipy'])} "
        f"({t['scipy'] / t['ks_sf']:.0f}× the time; the values agree within 1e-11 relative).",
    ]
    print(lines[-1], flush=True)
    return lines


def bench_accuracy(n: int, tg: Targets) -> list[str]:
    mu, sd, y = gaussian_batch(n, seed=1)
    pred = P.Gaussian(mu, sd)
    floors = {
        "mae": lambda: float(np.mean(np.abs(y - mu))),
        "rmse": lambda: float(np.sqrt(np.mean((y - mu) ** 2))),
    }
    lines = [
        f"### `mae` and `rmse` at N = {p10(n)}",
        "",
        "uqcore's `metric(name, prediction, y)` (validation of `y` included) against one numpy "
        "expression of the formula, alternated, medians of 15.",
        "",
        "| metric | uqcore | floor | uqcore / floor |",
        "|---|---:|---:|---:|",
    ]
    for name, fn in floors.items():
        t = medians(
            {"ours": lambda name=name: metric(name, pred, y), "floor": fn},
            {"ours": 15, "floor": 15},
        )
        r = t["ours"] / t["floor"]
        emit(lines, f"| `{name}` | {fmt_s(t['ours'])} | {fmt_s(t['floor'])} | {r:.2f} |")
        tg.add(f"`{name}` at N = {p10(n)}", "≤ 1.3 × numpy floor", f"{r:.2f} ×", r <= 1.3)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N up to 10^6")
    args = parser.parse_args()
    sizes = [10**4, 10**5, 10**6 if args.quick else 10**7]
    load0 = os.getloadavg()
    start = time.perf_counter()
    tg = Targets()
    body = [*bench_evaluate(sizes, tg), ""]
    body += [*bench_ks(10**5), ""]
    body += [*bench_accuracy(10**6, tg), ""]
    load1 = os.getloadavg()
    header = [
        f"Run: `python benchmarks/floor.py{' --quick' if args.quick else ''}` on "
        f"{time.strftime('%Y-%m-%d')}, {(time.perf_counter() - start) / 60:.1f} min. Machine: "
        f"{machine()}, {platform.system()} {platform.machine()}; Python "
        f"{platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, "
        f"uqcore {uqcore.__version__}. 1-minute load average {load0[0]:.1f} at the start, "
        f"{load1[0]:.1f} at the end (a shared machine: absolute times are noisy, the ratios are "
        "of medians of alternated repetitions in this run).",
        "",
    ]
    write_section(SECTION, "\n".join([*header, *tg.lines(), "", *body]))


if __name__ == "__main__":
    main()
