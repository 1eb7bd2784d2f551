"""Synthetic datasets of the papers with their true predictive distributions.

Each generator draws a training set and a test set (seeded by ``seed``, one
:class:`numpy.random.Generator`) and returns a :class:`SyntheticDataset` whose ``true_test`` is
the data-generating conditional distribution p(y | x) at the test inputs, as a prediction
object: evaluating it with any metric gives the "true distribution" / "ground truth" rows of
the papers' tables (see ``scripts/reproduce_papers.py``).

Datasets (``DATASETS`` maps the names to the generators):

``xiong2024_homoscedastic``    y = cos(1.5πx) + ε, ε ~ N(0, 0.1²), x ~ U[−1, 1]
``xiong2024_heteroscedastic``  y = cos(1.5πx) + ε, ε ~ N(0, (0.4·|cos(1.5πx)|)²), x ~ U[−1, 1]
``xiong2024_multimodal``       y = 0.5 ± cos(2πx) + ε (each sign with probability 1/2),
                               ε ~ N(0, 0.05²), x ~ U[0, 1]; the truth is a 2-component Mixture
``xiong2024_epistemic``        y = 0.5 + cos(4πx) + ε, ε ~ N(0, 0.05²), x ~ U[0, 1] for the test
                               set and x ~ U([0, 1] \\ [0.35, 0.65]) for the training set
``moukari2019_cubic``          y = x³ + ε, ε ~ N(0, 3²), x ~ U[−4, 4], 20 training points;
                               training targets with x ∈ [−2.3, −1.3] get a bias ``outlier_bias``
``chung2021_case_study``       y = sin(x/2) + x·cos(0.8x) + ε, x ~ U[−10, 10], ε ~ N(0, σ(x)²)
                               with σ = 1, 0.01, 1.5, 0.5 on [−10, −5), [−5, 0), [0, 5), [5, 10]

References: xiong2024 §IV-A (where N(0, σ) denotes standard deviation σ); moukari2019 §V-A;
chung2021 appendix A.1. Sizes the papers do not state are arguments with documented defaults.

>>> ds = load("xiong2024_homoscedastic", n_train=10, n_test=5, seed=0)
>>> ds.x_train.shape, ds.y_test.shape, ds.true_test.kind
((10,), (5,), 'gaussian')
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from uqcore._validation import UQValidationError
from uqcore.predictions.regression import Gaussian, Mixture, RegressionPrediction

__all__ = [
    "DATASETS",
    "EPISTEMIC_GAP",
    "SyntheticDataset",
    "chung2021_case_study",
    "load",
    "moukari2019_cubic",
    "names",
    "xiong2024_epistemic",
    "xiong2024_heteroscedastic",
    "xiong2024_homoscedastic",
    "xiong2024_multimodal",
]

FloatArray = np.ndarray[Any, np.dtype[np.float64]]

#: The training gap of the epistemic dataset (xiong2024 §IV-A): no training x in this interval.
EPISTEMIC_GAP = (0.35, 0.65)
#: The interval of corrupted training points of the moukari2019 toy (§V-A).
MOUKARI_OUTLIER_INTERVAL = (-2.3, -1.3)


@dataclass(frozen=True)
class SyntheticDataset:
    """One draw of a synthetic dataset: train and test sets and the true test distribution.

    Attributes
    ----------
    name : str
        The dataset's name in :data:`DATASETS`.
    x_train, y_train : ndarray, shape (n_train,)
    x_test, y_test : ndarray, shape (n_test,)
    true_test : RegressionPrediction
        The data-generating distribution p(y | x) at ``x_test`` (``y_test`` is a draw from it).
    description : str
        The generating process and the paper it comes from.
    """

    name: str
    x_train: FloatArray
    y_train: FloatArray
    x_test: FloatArray
    y_test: FloatArray
    true_test: RegressionPrediction
    description: str


def _check_size(n: Any, name: str, minimum: int = 1) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < minimum:
        raise UQValidationError(f"{name} must be an integer >= {minimum}, found {n!r}")
    return int(n)


def _rng(seed: Any) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise UQValidationError(
            f"seed must be an integer or a numpy Generator (results are reproducible), found {seed!r}"
        )
    return np.random.default_rng(int(seed))


def _positive(std: FloatArray) -> FloatArray:
    # The heteroscedastic std 0.4·|cos(1.5πx)| vanishes at isolated x; a draw landing on one
    # exactly would make the distribution degenerate. Keep it a valid (tiny) positive std.
    out: FloatArray = np.maximum(std, np.finfo(np.float64).tiny)
    return out


# -- xiong2024 §IV-A ------------------------------------------------------------------------
def _xiong_location_scale(
    name: str,
    mean_fn: Callable[[FloatArray], FloatArray],
    std_fn: Callable[[FloatArray], FloatArray],
    domain: tuple[float, float],
    n_train: int,
    n_test: int,
    seed: Any,
    description: str,
    gap: tuple[float, float] | None = None,
) -> SyntheticDataset:
    n_train = _check_size(n_train, "n_train")
    n_test = _check_size(n_test, "n_test")
    rng = _rng(seed)
    lo, hi = domain
    if gap is None:
        x_train = rng.uniform(lo, hi, size=n_train)
    else:
        # Uniform on [lo, hi] minus the gap: draw on the shortened interval and shift the part
        # beyond the gap's start by the gap's width.
        width = gap[1] - gap[0]
        u = rng.uniform(lo, hi - width, size=n_train)
        x_train = np.where(u >= gap[0], u + width, u)
    y_train = mean_fn(x_train) + std_fn(x_train) * rng.standard_normal(n_train)
    x_test = rng.uniform(lo, hi, size=n_test)
    mu, sd = mean_fn(x_test), std_fn(x_test)
    y_test = mu + sd * rng.standard_normal(n_test)
    return SyntheticDataset(
        name, x_train, y_train, x_test, y_test, Gaussian(mean=mu, std=sd), description
    )


def _cos15(x: FloatArray) -> FloatArray:
    out: FloatArray = np.cos(1.5 * math.pi * x)
    return out


def xiong2024_homoscedastic(
    n_train: int = 1000, n_test: int = 1000, *, seed: Any = 0
) -> SyntheticDataset:
    """xiong2024 §IV-A homoscedastic: y = cos(1.5πx) + ε, ε ~ N(0, 0.1²), x ~ U[−1, 1].

    The true distribution is ``Gaussian(cos(1.5πx), 0.1)``; its population NLL is
    ½·log(2πe·0.1²) ≈ −0.88365.
    """
    return _xiong_location_scale(
        "xiong2024_homoscedastic",
        _cos15,
        lambda x: np.full_like(x, 0.1),
        (-1.0, 1.0),
        n_train,
        n_test,
        seed,
        "xiong2024 §IV-A homoscedastic: y = cos(1.5πx) + N(0, 0.1²), x ~ U[-1, 1]",
    )


def xiong2024_heteroscedastic(
    n_train: int = 1000, n_test: int = 1000, *, seed: Any = 0
) -> SyntheticDataset:
    """xiong2024 §IV-A heteroscedastic: y = cos(1.5πx) + ε, ε ~ N(0, (0.4|cos(1.5πx)|)²).

    x ~ U[−1, 1]. The true distribution is ``Gaussian(cos(1.5πx), 0.4|cos(1.5πx)|)``. Its
    population NLL is ½·log(2πe) + log 0.4 + E[log|cos(1.5πx)|] = ½·log(2πe) + log 0.4 − log 2
    ≈ −0.19055 (1.5πx spans three periods of |cos|, over which the mean of log|cos| is −log 2).
    """
    return _xiong_location_scale(
        "xiong2024_heteroscedastic",
        _cos15,
        lambda x: _positive(0.4 * np.abs(_cos15(x))),
        (-1.0, 1.0),
        n_train,
        n_test,
        seed,
        "xiong2024 §IV-A heteroscedastic: y = cos(1.5πx) + N(0, (0.4|cos(1.5πx)|)²), x ~ U[-1, 1]",
    )


def xiong2024_multimodal(
    n_train: int = 1000, n_test: int = 1000, *, seed: Any = 0
) -> SyntheticDataset:
    """xiong2024 §IV-A multimodal: y = 0.5 ± cos(2πx) + ε, ε ~ N(0, 0.05²), x ~ U[0, 1].

    The sign is + or − with probability 1/2 each. The true distribution is the
    ``Mixture(weights=[½, ½], means=[0.5 + cos 2πx, 0.5 − cos 2πx], stds=[0.05, 0.05])``;
    its point prediction (the mean) is 0.5 everywhere.
    """
    n_train = _check_size(n_train, "n_train")
    n_test = _check_size(n_test, "n_test")
    rng = _rng(seed)

    def draw(n: int) -> tuple[FloatArray, FloatArray]:
        x = rng.uniform(0.0, 1.0, size=n)
        sign = np.where(rng.uniform(size=n) < 0.5, 1.0, -1.0)
        y = 0.5 + sign * np.cos(2 * math.pi * x) + 0.05 * rng.standard_normal(n)
        return x, y

    x_train, y_train = draw(n_train)
    x_test, y_test = draw(n_test)
    c = np.cos(2 * math.pi * x_test)
    true = Mixture(
        weights=np.full((n_test, 2), 0.5),
        means=np.stack([0.5 + c, 0.5 - c], axis=1),
        stds=np.full((n_test, 2), 0.05),
    )
    return SyntheticDataset(
        "xiong2024_multimodal",
        x_train,
        y_train,
        x_test,
        y_test,
        true,
        "xiong2024 §IV-A multimodal: y = 0.5 ± cos(2πx) + N(0, 0.05²) (signs 50/50), x ~ U[0, 1]",
    )


def xiong2024_epistemic(
    n_train: int = 1000, n_test: int = 1000, *, seed: Any = 0
) -> SyntheticDataset:
    """xiong2024 §IV-A epistemic: y = 0.5 + cos(4πx) + ε, ε ~ N(0, 0.05²).

    Training inputs are uniform on [0, 1] without the gap ``EPISTEMIC_GAP`` = [0.35, 0.65];
    test inputs are uniform on [0, 1] (the gap is out of distribution). The true distribution is
    ``Gaussian(0.5 + cos 4πx, 0.05)``, population NLL ½·log(2πe·0.05²) ≈ −1.57680.
    """
    return _xiong_location_scale(
        "xiong2024_epistemic",
        lambda x: 0.5 + np.cos(4 * math.pi * x),
        lambda x: np.full_like(x, 0.05),
        (0.0, 1.0),
        n_train,
        n_test,
        seed,
        "xiong2024 §IV-A epistemic: y = 0.5 + cos(4πx) + N(0, 0.05²), x ~ U[0, 1]; "
        "no training x in [0.35, 0.65]",
        gap=EPISTEMIC_GAP,
    )


# -- moukari2019 §V ---------------------------------------------------------------------------
def moukari2019_cubic(
    n_train: int = 20,
    n_test: int = 1000,
    *,
    seed: Any = 0,
    outlier_bias: float = 50.0,
    test_outliers: bool = False,
) -> SyntheticDataset:
    """moukari2019 §V-A toy: y = x³ + ε, ε ~ N(0, 3²), x ~ U[−4, 4], 20 training points.

    Training points with x in [−2.3, −1.3] get "a high bias" to simulate outliers; the paper
    does not state its size, so it is ``outlier_bias`` (default +50, about 17 noise standard
    deviations; y = x³ lies in [−12.2, −2.2] there). Test data come from the clean process by
    default (the true distribution is ``Gaussian(x³, 3)``); with ``test_outliers=True`` the
    test targets in the interval are biased too and the true distribution's mean includes the
    bias.
    """
    n_train = _check_size(n_train, "n_train")
    n_test = _check_size(n_test, "n_test")
    if not (isinstance(outlier_bias, (int, float)) and math.isfinite(outlier_bias)):
        raise UQValidationError(f"outlier_bias must be a finite number, found {outlier_bias!r}")
    rng = _rng(seed)
    lo, hi = MOUKARI_OUTLIER_INTERVAL

    def bias(x: FloatArray) -> FloatArray:
        out: FloatArray = np.where((x >= lo) & (x <= hi), float(outlier_bias), 0.0)
        return out

    x_train = rng.uniform(-4.0, 4.0, size=n_train)
    y_train = x_train**3 + 3.0 * rng.standard_normal(n_train) + bias(x_train)
    x_test = rng.uniform(-4.0, 4.0, size=n_test)
    mu = x_test**3 + (bias(x_test) if test_outliers else 0.0)
    y_test = mu + 3.0 * rng.standard_normal(n_test)
    return SyntheticDataset(
        "moukari2019_cubic",
        x_train,
        y_train,
        x_test,
        y_test,
        Gaussian(mean=mu, std=np.full(n_test, 3.0)),
        "moukari2019 §V-A: y = x³ + N(0, 3²), x ~ U[-4, 4]; training targets with "
        f"x in [-2.3, -1.3] biased by {float(outlier_bias):g}",
    )


# -- chung2021 appendix A.1 -------------------------------------------------------------------
def _chung_mean(x: FloatArray) -> FloatArray:
    out: FloatArray = np.sin(x / 2.0) + x * np.cos(0.8 * x)
    return out


def _chung_std(x: FloatArray) -> FloatArray:
    out: FloatArray = np.select([x < -5.0, x < 0.0, x < 5.0], [1.0, 0.01, 1.5], default=0.5).astype(
        np.float64
    )
    return out


def chung2021_case_study(
    n_train: int = 200, n_test: int = 300, *, seed: Any = 0
) -> SyntheticDataset:
    """chung2021 appendix A.1: y = sin(x/2) + x·cos(0.8x) + ε, x ~ U[−10, 10].

    ε ~ N(0, σ(x)²) with σ = 1 on [−10, −5), 0.01 on [−5, 0), 1.5 on [0, 5), 0.5 on [5, 10].
    The paper trains with full batches of 200 (the default ``n_train``) and does not state the
    test size; ``n_test = 300`` is our choice (docs/reproduction.md explains it). The true
    distribution is ``Gaussian(sin(x/2) + x cos(0.8x), σ(x))``.
    """
    n_train = _check_size(n_train, "n_train")
    n_test = _check_size(n_test, "n_test")
    rng = _rng(seed)
    x_train = rng.uniform(-10.0, 10.0, size=n_train)
    y_train = _chung_mean(x_train) + _chung_std(x_train) * rng.standard_normal(n_train)
    x_test = rng.uniform(-10.0, 10.0, size=n_test)
    mu, sd = _chung_mean(x_test), _chung_std(x_test)
    y_test = mu + sd * rng.standard_normal(n_test)
    return SyntheticDataset(
        "chung2021_case_study",
        x_train,
        y_train,
        x_test,
        y_test,
        Gaussian(mean=mu, std=sd),
        "chung2021 appendix A.1: y = sin(x/2) + x cos(0.8x) + N(0, σ(x)²), x ~ U[-10, 10], "
        "σ = 1, 0.01, 1.5, 0.5 on the four quarters",
    )


#: Dataset name -> generator ``f(n_train, n_test, *, seed, ...) -> SyntheticDataset``.
DATASETS: dict[str, Callable[..., SyntheticDataset]] = {
    "xiong2024_homoscedastic": xiong2024_homoscedastic,
    "xiong2024_heteroscedastic": xiong2024_heteroscedastic,
    "xiong2024_multimodal": xiong2024_multimodal,
    "xiong2024_epistemic": xiong2024_epistemic,
    "moukari2019_cubic": moukari2019_cubic,
    "chung2021_case_study": chung2021_case_study,
}


def names() -> list[str]:
    """The dataset names, in a fixed order."""
    return list(DATASETS)


def load(name: str, **kwargs: Any) -> SyntheticDataset:
    """Draw dataset ``name`` (see :data:`DATASETS`); keyword arguments go to its generator."""
    if name not in DATASETS:
        raise UQValidationError(
            f"name must be one of {', '.join(map(repr, DATASETS))}, found {name!r}"
        )
    return DATASETS[name](**kwargs)
