"""The bootstrap in parts: values of resample ranges, computed apart and combined, give the
intervals of one bootstrap run bit for bit (what lets a job split its resamples among
workers)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import numpy as np
import pytest

from uqcore import predictions as P
from uqcore._validation import UQValidationError
from uqcore.stability import (
    BootstrapValues,
    bootstrap,
    bootstrap_block_size,
    bootstrap_values,
    combine_bootstrap_values,
    iter_bootstrap_values,
)
from uqcore.stability._engine import COUNT_BLOCK_BYTES


def _gaussian(n: int, seed: int = 1) -> tuple[Any, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.5, 2.0, size=n)
    return P.Gaussian(mu, sd), mu + sd * rng.standard_t(5, size=n)


def _doc(result: Any) -> str:
    return json.dumps(result.to_dict(), sort_keys=True)


#: Adversarial group calibration draws num_trials × num_group_draws random groups of every size
#: on each resample (10 × 10 by default): most of the time of a run of "all" here. Fewer draws
#: take the same path (the groups drawn from each resample's category totals, in the helper
#: thread), so every metric is still resampled, in parts and whole.
_PARAMS: dict[str, dict[str, Any]] = {
    "adversarial_group_calibration": {"num_trials": 2, "num_group_draws": 3}
}


#: BCa's delete-a-block jackknife in 20 blocks (100 by default): each block is one more run of
#: every metric not of mean type, the same whether the bootstrap values come in parts or not.
_JACKKNIFE: dict[str, Any] = {"jackknife_blocks": 20}


def _in_parts(bounds: list[int], *args: Any, **kw: Any) -> BootstrapValues:
    parts = [bootstrap_values(*args, start=a, stop=b, **kw) for a, b in itertools.pairwise(bounds)]
    return combine_bootstrap_values(parts)


def test_block_size_is_the_one_bootstrap_uses() -> None:
    # an independent statement of the rule: at most COUNT_BLOCK_BYTES one-byte counts, 1..256, <= B
    for n, b in [(10, 1000), (10**6, 1000), (10**7, 1000), (10**8, 50), (3, 2), (2**23, 7)]:
        expected = max(1, min(b, COUNT_BLOCK_BYTES // n, 256))
        assert bootstrap_block_size(n, b) == expected
    with pytest.raises(UQValidationError, match="n_resamples"):
        bootstrap_block_size(10, 0)


_BOUNDS = {
    "one": [0, 100],
    "every-block": [0, 16, 32, 48, 64, 80, 96, 100],
    "two": [0, 64, 100],
    "uneven": [0, 32, 96, 100],
}


# Every split with percentile intervals; BCa (whose jackknife, over the data, is the costly
# part and the same whatever the split) with the most general one.
@pytest.mark.parametrize(
    ("method", "bounds"),
    [pytest.param("percentile", b, id=f"{name}-percentile") for name, b in _BOUNDS.items()]
    + [pytest.param("bca", _BOUNDS["uneven"], id="uneven-bca")],
)
def test_parts_give_the_bootstrap_bit_for_bit(method: str, bounds: list[int]) -> None:
    pred, y = _gaussian(300)
    kw: dict[str, Any] = {"n_resamples": 100, "seed": 11, "block_size": 16, "params": _PARAMS}
    whole = bootstrap(pred, y, "all", method=method, keep_values=True, **kw, **_JACKKNIFE)  # type: ignore[arg-type]
    values = _in_parts(bounds, pred, y, "all", **kw)
    again = bootstrap(
        pred,
        y,
        "all",
        method=method,  # type: ignore[arg-type]
        keep_values=True,
        values=values,
        **kw,
        **_JACKKNIFE,
    )
    assert _doc(again) == _doc(whole)
    # the values are those of the run, resample by resample
    for name, entry in whole.items():
        got = [None if not np.isfinite(v) else float(v) for v in values[name]]
        assert got == entry["values"], name


def test_default_block_size_and_a_large_batch() -> None:
    # N such that the default block holds 128 resamples: parts on its multiples
    n = COUNT_BLOCK_BYTES // 128
    pred, y = _gaussian(n, seed=4)
    block = bootstrap_block_size(n, 300)
    assert block == 128
    metrics = ["mae", "rmse", "crps", "nll", "spearman", "coverage"]
    whole = bootstrap(pred, y, metrics, n_resamples=300, seed=2)
    values = _in_parts([0, 128, 256, 300], pred, y, metrics, n_resamples=300, seed=2)
    assert _doc(bootstrap(pred, y, metrics, n_resamples=300, seed=2, values=values)) == _doc(whole)


@pytest.mark.parametrize("unit", ["stratified", "cluster"])
@pytest.mark.parametrize("scheme", ["multinomial", "poisson"])
def test_grouped_units(unit: str, scheme: str) -> None:
    pred, y = _gaussian(240, seed=5)
    groups = np.random.default_rng(6).integers(0, 9, size=240)
    kw: dict[str, Any] = {
        "n_resamples": 90,
        "seed": 3,
        "block_size": 8,
        "unit": unit,
        "scheme": scheme,
        "groups": groups,
        "params": _PARAMS,
    }
    values = _in_parts([0, 24, 40, 88, 90], pred, y, "all", **kw)  # one set for both methods
    for method in ("percentile", "bca"):
        whole = bootstrap(pred, y, "all", method=method, **kw, **_JACKKNIFE)
        again = bootstrap(pred, y, "all", method=method, values=values, **kw, **_JACKKNIFE)
        assert _doc(again) == _doc(whole)


def test_undefined_resamples_keep_their_reasons() -> None:
    # 8 rows with tied stds: correlations are undefined on some resamples
    rng = np.random.default_rng(1)
    mu = rng.normal(size=8)
    sd = np.round(rng.uniform(0.5, 2, size=8), 0)
    pred, y = P.Gaussian(mu, sd), mu + rng.normal(size=8)
    kw: dict[str, Any] = {"n_resamples": 60, "seed": 3, "block_size": 4}
    whole = bootstrap(pred, y, "all", **kw)
    assert any(entry["n_undefined"] for entry in whole.values())
    parts = [bootstrap_values(pred, y, "all", start=a, stop=a + 4, **kw) for a in range(0, 60, 4)]
    assert any(p.undefined_reasons for p in parts)
    again = bootstrap(pred, y, "all", values=combine_bootstrap_values(parts), **kw)
    assert _doc(again) == _doc(whole)
    assert again.warnings == whole.warnings


def test_a_classification_prediction_with_estimators() -> None:
    rng = np.random.default_rng(8)
    members = rng.dirichlet(np.full(4, 0.7), size=(3, 150))
    labels = np.argmax(members.mean(axis=0), axis=1)
    flip = rng.random(150) < 0.35
    labels[flip] = rng.integers(0, 4, size=int(flip.sum()))
    ood = rng.random(150) < 0.3
    pred = P.Ensemble(member_probs=members, estimates={"mine": np.round(rng.random(150), 1)})
    kw: dict[str, Any] = {
        "n_resamples": 50,
        "seed": 9,
        "block_size": 8,
        "estimators": "all",
        "ood": ood,
    }
    values = _in_parts([0, 16, 48, 50], pred, labels, "all", **kw)  # one set for both methods
    for method in ("percentile", "bca"):
        whole = bootstrap(pred, labels, "all", method=method, **kw, **_JACKKNIFE)
        assert any("[" in name for name in whole)  # per-estimator entries too
        again = bootstrap(pred, labels, "all", method=method, values=values, **kw, **_JACKKNIFE)
        assert _doc(again) == _doc(whole)


def test_misaligned_or_out_of_range_parts_are_refused() -> None:
    pred, y = _gaussian(50)
    kw: dict[str, Any] = {"n_resamples": 40, "block_size": 8}
    for start, stop in [(4, 16), (0, 12), (8, 8), (-8, 8), (0, 48)]:
        with pytest.raises(UQValidationError, match="start"):
            bootstrap_values(pred, y, ["mae"], start=start, stop=stop, **kw)
    # the last part may end at B whatever the block size
    assert bootstrap_values(pred, y, ["mae"], start=32, stop=40, **kw)["mae"].shape == (8,)


def test_given_values_are_checked() -> None:
    pred, y = _gaussian(50)
    ok = bootstrap_values(pred, y, ["mae", "rmse"], start=0, stop=20, n_resamples=20)
    with pytest.raises(UQValidationError, match="'rmse' is missing"):
        bootstrap(pred, y, ["mae", "rmse"], n_resamples=20, values={"mae": ok["mae"]})
    with pytest.raises(UQValidationError, match=r"shape \(30,\)"):
        bootstrap(pred, y, ["mae", "rmse"], n_resamples=30, values=ok)
    with pytest.raises(UQValidationError, match="same metrics"):
        combine_bootstrap_values([ok, {"mae": ok["mae"]}])


def test_a_plain_mapping_of_arrays_is_accepted() -> None:
    pred, y = _gaussian(80)
    whole = bootstrap(pred, y, ["mae", "crps"], n_resamples=40, seed=1)
    part = bootstrap_values(pred, y, ["mae", "crps"], start=0, stop=40, n_resamples=40, seed=1)
    plain = {k: np.array(v) for k, v in part.items()}
    again = bootstrap(pred, y, ["mae", "crps"], n_resamples=40, seed=1, values=plain)
    assert _doc(again) == _doc(whole)


def test_ranges_on_one_batch_handed_out_lazily() -> None:
    pred, y = _gaussian(200, seed=12)
    kw: dict[str, Any] = {"n_resamples": 70, "seed": 5, "block_size": 8, "params": _PARAMS}
    handed: list[tuple[int, int]] = []

    def ranges() -> Any:
        for r in [(0, 24), (24, 32), (32, 70)]:
            handed.append(r)
            yield r

    seen: list[tuple[int, int, float]] = []
    parts = iter_bootstrap_values(
        pred, y, "all", ranges=ranges(), progress=lambda a, b, f: seen.append((a, b, f)), **kw
    )
    first = next(parts)
    assert handed == [(0, 24)]  # the next range is read only when asked for
    rest = list(parts)
    assert [(p.start, p.stop) for p in [first, *rest]] == handed
    assert seen[-1] == (32, 70, 1.0) and (0, 24, 1.0) in seen
    for method in ("percentile", "bca"):
        whole = bootstrap(pred, y, "all", method=method, **kw, **_JACKKNIFE)  # type: ignore[arg-type]
        values = combine_bootstrap_values([first, *rest])
        again = bootstrap(pred, y, "all", method=method, values=values, **kw, **_JACKKNIFE)  # type: ignore[arg-type]
        assert _doc(again) == _doc(whole)
