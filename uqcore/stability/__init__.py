"""How much to trust a metric value: bootstrap intervals, convergence with the test-set size,
paired comparison of predictions and the distribution of ranks — for every registered metric.

Resamples and subsamples are weight vectors over the rows (:mod:`uqcore.stability.weights`),
evaluated by one engine that reuses the batch's sorts and PIT values and computes the metrics
that are means of per-row terms as one matrix product per block of resamples.
"""

from uqcore import registry
from uqcore.stability._engine import StabilityResult
from uqcore.stability.bootstrap import (
    BootstrapValues,
    bootstrap,
    bootstrap_block_size,
    bootstrap_values,
    combine_bootstrap_values,
    iter_bootstrap_values,
)
from uqcore.stability.compare import Comparisons, compare, compare_all, rank_distribution
from uqcore.stability.convergence import convergence, minimum_reliable_size
from uqcore.stability.gate import quality_gate

__all__ = [
    "BIASED_METRICS",
    "BootstrapValues",
    "Comparisons",
    "StabilityResult",
    "bootstrap",
    "bootstrap_block_size",
    "bootstrap_values",
    "combine_bootstrap_values",
    "compare",
    "compare_all",
    "convergence",
    "iter_bootstrap_values",
    "minimum_reliable_size",
    "quality_gate",
    "rank_distribution",
]

#: The names of the metrics whose estimator has a known finite-sample bias (derived from
#: :attr:`~uqcore.registry.MetricSpec.biased`, which the engine reads).
BIASED_METRICS = frozenset(spec.name for spec in registry.specs() if spec.biased)
