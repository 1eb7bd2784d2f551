"""Whole blocks of resamples at once for every metric that is not a plain mean (numpy batches).

A block of b dense resamples is a weight matrix W (b × N). Per resample, these metrics need
only two kinds of quantities, none of which needs a sort or a call of the metric:

- **weighted row sums** Σ_i w_i x_i of fixed per-row columns x (the engine's mean-type terms,
  moments for Pearson, corr and R², the coverage indicators and interval widths, σ and |e|):
  every column that any metric of the batch asks for goes into one N × K matrix X, built once
  (equal columns once), and a block costs one matrix product W·X (see :meth:`Keys.column`);
- **cumulative weights along fixed orders** of the rows (ascending uncertainty, |error|, PIT,
  |error|/σ; the argsorts are the batch's, computed once): W is gathered once per block into
  each order it is needed in (as bytes when the weights are small integers) and summed
  cumulatively, exactly, in integers — in full where a metric needs every row (latency-bound,
  ≈ 2 ns per row), else only where it is read: per-chunk totals plus a few chunks, or a window
  from the nearer end of the order.

The cost is a few O(b·N) passes per order and block, against O(b·N) plus per-call overhead,
digamma evaluations, bincounts and repeated gathers when each resample goes through the
metric's implementation. N-sized outputs are written into buffers reused by every block
(:meth:`Keys.scratch`).

Each evaluator reproduces its metric's implementation up to floating-point rounding (the
stability tests check both against the metric on the explicitly resampled arrays and against
the per-resample path) under conditions stated in its prepare function; when they do not
hold (ties in a key, options other than those handled, non-integer weights where integer ones
are needed, a non-numpy backend) the metric is evaluated resample by resample through its
implementation, as before.

The modules: :mod:`~.context` (the per-batch :class:`Keys` and per-block
:class:`BlockContext`), :mod:`~.search` (searches and weighted quantiles in cumulative
weights), :mod:`~.background` (the helper thread), :mod:`~.tuning` (block and chunk sizes),
one module per family of metrics — :mod:`~.ranks` (Spearman, AUSE, AURG),
:mod:`~.calibration` (the PIT and the calibration errors), :mod:`~.row_sums` (Pearson, corr,
R², coverage, mean width), :mod:`~.quantiles` (MdAE, MeRCI, n-MeRCI), :mod:`~.binned` (ENCE,
UCE), :mod:`~.strata` (size-stratified coverage), :mod:`~.hsic` (HSIC of the interval width and
coverage) — and :mod:`~.table`, the metrics that have
a block path.
"""

from uqcore.stability.blocks.background import Deferred, ahead, beside
from uqcore.stability.blocks.context import (
    BlockContext,
    BlockEvaluator,
    Keys,
    Partial,
    context,
    rows_per_block,
)
from uqcore.stability.blocks.table import BESIDE, PATHS, BlockPath, prepare, undefined_reason

__all__ = [
    "BESIDE",
    "PATHS",
    "BlockContext",
    "BlockEvaluator",
    "BlockPath",
    "Deferred",
    "Keys",
    "Partial",
    "ahead",
    "beside",
    "context",
    "prepare",
    "rows_per_block",
    "undefined_reason",
]
