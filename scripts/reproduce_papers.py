"""Reproduce the papers' "true distribution" rows with uqcore's metrics and synthetic data.

* xiong2024 Tables I-IV, row "True dist.": AUSE, calibration error, NLL of the true
  distribution on the four synthetic test sets (``uqcore.synthetic.xiong2024_*``).
* chung2021 Table 2, row "Ground Truth": RMSE, MAE, ECE, sharpness, NLL, CRPS, check score,
  interval score of the true distribution on the case-study data
  (``uqcore.synthetic.chung2021_case_study``).

Each value is computed on ``--seeds`` independent test sets; the table shows our mean ± sd over
seeds next to the paper's figure. docs/reproduction.md discusses the comparison.

Usage: ``python scripts/reproduce_papers.py [--seeds 20] [--out docs/reproduction_table.md]``
"""

from __future__ import annotations

import argparse
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from uqcore import evaluate
from uqcore import predictions as P
from uqcore import synthetic as S

#: Test size for the xiong2024 datasets (the paper does not state it; see docs/reproduction.md).
XIONG_N_TEST = 1000
#: Test size for the chung2021 case study (not stated; inferred from its ECE, see the docs).
CHUNG_N_TEST = 300

#: xiong2024's calibration error: mean over the levels of (p_j − p̂_j)² (w_j = 1/M), one-sided
#: proportions, levels 0.01..0.99 — the convention consistent with the tables (docs).
XIONG_PARAMS: dict[str, dict[str, Any]] = {
    "calibration_error": {"level_weights": "mean", "prop_type": "quantile"},
}

#: Paper figures: (dataset, metric) -> value.
XIONG_PAPER = {
    "xiong2024_homoscedastic": {"ause": 0.5917, "calibration_error": 0.0003, "nll": -0.8965},
    "xiong2024_heteroscedastic": {"ause": 0.2305, "calibration_error": 0.0001, "nll": -0.1472},
    "xiong2024_multimodal": {"ause": 0.5180, "calibration_error": 0.0001, "nll": -0.7935},
    "xiong2024_epistemic": {"ause": 0.5454, "calibration_error": 0.0001, "nll": -1.5871},
}
#: chung2021 Table 2, Ground Truth: mean ± standard error over its 5 seeds.
CHUNG_PAPER = {
    "rmse": (0.962, 0.064),
    "mae": (0.618, 0.042),
    "ece": (0.019, 0.002),
    "sharpness": (0.925, 0.052),
    "nll": (0.187, 0.115),
    "crps": (0.435, 0.033),
    "check_score": (0.219, 0.017),
    "interval_score": (2.122, 0.177),
}
CHUNG_PARAMS: dict[str, dict[str, Any]] = {"ece": {"compat": "uncertainty_toolbox"}}


@dataclass(frozen=True)
class Row:
    """One reproduced figure: our values over seeds and the paper's."""

    table: str
    dataset: str
    metric: str
    values: tuple[float, ...]
    paper: float
    paper_se: float | None = None

    @property
    def mean(self) -> float:
        return float(np.mean(self.values))

    @property
    def sd(self) -> float:
        return float(np.std(self.values, ddof=1)) if len(self.values) > 1 else 0.0


def _evaluate(pred: Any, y: Any, metrics: list[str], params: dict[str, Any]) -> dict[str, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = evaluate(pred, y, metrics=metrics, params=params)
    out = {}
    for name in metrics:
        v = rep[name]
        out[name] = float(v["value"]) if isinstance(v, dict) else float(v)  # type: ignore[arg-type]
    return out


def xiong_rows(seeds: range, n_test: int = XIONG_N_TEST) -> list[Row]:
    """The "True dist." rows of xiong2024 Tables I-IV (plus the multimodal mode variant)."""
    rows: list[Row] = []
    tables = dict(zip(XIONG_PAPER, ("I", "II", "III", "IV"), strict=True))
    for name, paper in XIONG_PAPER.items():
        vals: dict[str, list[float]] = {m: [] for m in paper}
        mode_ause: list[float] = []
        for seed in seeds:
            ds = S.load(name, n_train=1, n_test=n_test, seed=seed)
            res = _evaluate(ds.true_test, ds.y_test, list(paper), XIONG_PARAMS)
            for m in paper:
                vals[m].append(res[m])
            if name == "xiong2024_multimodal":
                # A mode of the true mixture as the point prediction (as a mode-seeking model
                # predicts), with the mixture std as the uncertainty.
                mix = ds.true_test
                mode = P.PointUncertainty(np.asarray(mix.means)[:, 0], np.asarray(mix.std()))
                mode_ause.append(_evaluate(mode, ds.y_test, ["ause"], {})["ause"])
        for m in paper:
            rows.append(Row(f"xiong2024 {tables[name]}", name, m, tuple(vals[m]), paper[m]))
        if mode_ause:
            rows.append(
                Row("xiong2024 III", name, "ause (point = a mode)", tuple(mode_ause), paper["ause"])
            )
    return rows


def chung_rows(seeds: range, n_test: int = CHUNG_N_TEST) -> list[Row]:
    """The "Ground Truth" row of chung2021 Table 2."""
    metrics = list(CHUNG_PAPER)
    vals: dict[str, list[float]] = {m: [] for m in metrics}
    for seed in seeds:
        ds = S.chung2021_case_study(n_train=1, n_test=n_test, seed=seed)
        res = _evaluate(ds.true_test, ds.y_test, metrics, CHUNG_PARAMS)
        for m in metrics:
            vals[m].append(res[m])
    return [
        Row("chung2021 2", "chung2021_case_study", m, tuple(vals[m]), *CHUNG_PAPER[m])
        for m in metrics
    ]


def population_values() -> dict[str, float]:
    """Population (N → ∞) values that have a closed form."""
    half_log_2pie = 0.5 * math.log(2 * math.pi * math.e)
    sig = np.array([1.0, 0.01, 1.5, 0.5])
    return {
        "xiong2024_homoscedastic nll": half_log_2pie + math.log(0.1),
        "xiong2024_heteroscedastic nll": half_log_2pie + math.log(0.4) - math.log(2.0),
        "xiong2024_epistemic nll": half_log_2pie + math.log(0.05),
        "chung2021_case_study nll": half_log_2pie + float(np.mean(np.log(sig))),
        "chung2021_case_study rmse": float(np.sqrt(np.mean(sig**2))),
        "chung2021_case_study sharpness": float(np.sqrt(np.mean(sig**2))),
        "chung2021_case_study mae": math.sqrt(2 / math.pi) * float(np.mean(sig)),
        "chung2021_case_study crps": float(np.mean(sig)) / math.sqrt(math.pi),
    }


def markdown(rows: list[Row], n_seeds: int) -> str:
    lines = [
        f"| table | dataset | metric | ours: mean ± sd over {n_seeds} seeds | paper | "
        "paper − ours in our sd |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        paper = f"{r.paper:.4g}" + (f" ± {r.paper_se:.3g}" if r.paper_se is not None else "")
        z = (r.paper - r.mean) / r.sd if r.sd > 0 else float("nan")
        lines.append(
            f"| {r.table} | {r.dataset} | {r.metric} | {r.mean:.4f} ± {r.sd:.4f} | {paper} | "
            f"{z:+.1f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="number of seeds (0..n-1)")
    parser.add_argument("--xiong-n-test", type=int, default=XIONG_N_TEST)
    parser.add_argument("--chung-n-test", type=int, default=CHUNG_N_TEST)
    parser.add_argument("--out", default=None, help="also write the markdown table here")
    args = parser.parse_args()
    seeds = range(args.seeds)
    rows = xiong_rows(seeds, args.xiong_n_test) + chung_rows(seeds, args.chung_n_test)
    text = markdown(rows, args.seeds)
    text += "\nPopulation values (closed form):\n\n"
    text += "\n".join(f"- {k}: {v:.5f}" for k, v in population_values().items()) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
