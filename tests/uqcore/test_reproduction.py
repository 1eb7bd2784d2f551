"""The papers' true-distribution rows are reproduced within sampling error (seeded, fast).

Tolerances come from the spread over seeds that the reproduction script observes (our sd over
20 seeded test sets): a paper figure from one test set must lie within 3 sd of our mean, and a
5-seed mean (chung2021 Table 2) within 3 sd/√5. Known, documented differences
(docs/reproduction.md) are asserted as such.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "reproduce_papers", ROOT / "scripts" / "reproduce_papers.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


R = _script()
SEEDS = range(20)


@pytest.fixture(scope="module")
def xiong() -> dict[tuple[str, str], object]:
    return {(r.dataset, r.metric): r for r in R.xiong_rows(SEEDS)}


@pytest.fixture(scope="module")
def chung() -> dict[str, object]:
    return {r.metric: r for r in R.chung_rows(SEEDS)}


@pytest.mark.parametrize(
    "dataset", ["xiong2024_homoscedastic", "xiong2024_heteroscedastic", "xiong2024_epistemic"]
)
@pytest.mark.parametrize("name", ["calibration_error", "nll"])
def test_xiong_true_dist_rows(xiong: dict, dataset: str, name: str) -> None:
    r = xiong[(dataset, name)]
    # + half a unit of the paper's last printed digit (4 decimals)
    assert abs(r.paper - r.mean) <= 3 * r.sd + 5e-5


def test_xiong_calibration_error_multimodal(xiong: dict) -> None:
    r = xiong[("xiong2024_multimodal", "calibration_error")]
    assert abs(r.paper - r.mean) <= 3 * r.sd + 5e-5


def test_xiong_ause(xiong: dict) -> None:
    r = xiong[("xiong2024_heteroscedastic", "ause")]
    assert abs(r.paper - r.mean) <= 3 * r.sd
    # Constant true std: every uncertainty ties. uqcore's AUSE averages over tie orders (a
    # deterministic value); the paper's single random tie order spreads by about 0.027 at
    # N = 1000 (measured with the input order, docs/reproduction.md).
    for ds in ("xiong2024_homoscedastic", "xiong2024_epistemic"):
        r = xiong[(ds, "ause")]
        assert abs(r.paper - r.mean) <= 2 * 0.027


def test_xiong_multimodal_known_differences(xiong: dict) -> None:
    # Documented: the paper's AUSE 0.518 and NLL -0.7935 are not those of the true mixture
    # (mean point: AUSE ≈ 0.007; population NLL ≈ -0.908).
    ause = xiong[("xiong2024_multimodal", "ause")]
    assert ause.mean < 0.02
    nll = xiong[("xiong2024_multimodal", "nll")]
    assert abs(nll.mean - (-0.90807)) <= 3 * nll.sd / math.sqrt(len(SEEDS))
    assert nll.paper - nll.mean > 3 * nll.sd


def test_heteroscedastic_nll_population(xiong: dict) -> None:
    r = xiong[("xiong2024_heteroscedastic", "nll")]
    pop = R.population_values()["xiong2024_heteroscedastic nll"]
    assert abs(r.mean - pop) <= 3 * r.sd / math.sqrt(len(SEEDS))


@pytest.mark.parametrize("name", list(R.CHUNG_PAPER))
def test_chung_ground_truth_row(chung: dict, name: str) -> None:
    r = chung[name]
    assert abs(r.paper - r.mean) <= 3 * r.sd / math.sqrt(5)
