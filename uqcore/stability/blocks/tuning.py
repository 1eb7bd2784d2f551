"""The sizes and switches of the block paths, in one place.

They change how the work is cut, never a value. The block modules read them as attributes of
this module when they run, so a test can shrink them (``monkeypatch.setattr(tuning, ...)``) to
exercise every window, chunk and block boundary on small inputs.
"""

__all__ = [
    "BACKGROUND",
    "BLOCK_ELEMENTS",
    "CHUNK",
    "LINEAR_EINSUM_MAX",
    "LINEAR_PRODUCT_MAX",
    "LOCAL_MARGIN",
    "LOCAL_MARGIN_FACTOR",
    "PREFIX_CHUNK",
]

#: Elements of one block of the order-based paths (b·N): 2 MiB per float64 array. Measured at
#: N = 10⁵: blocks of 2¹⁸ weights were 2–4× faster than blocks of 2²³ (the derived arrays of a
#: block stay in the cache).
BLOCK_ELEMENTS = 2**18

#: Row sums of at most this many products (b·N·K) are computed by ``einsum`` rather than by
#: the BLAS matrix product: a multithreaded BLAS leaves its threads spinning after each call
#: (measured at N = 10⁴ with two columns: twice the CPU time of the whole bootstrap, taken from
#: the other jobs of a shared machine), while for a few columns numpy's loop costs little.
LINEAR_EINSUM_MAX = 2**25

#: Products (b·rows·K) of one BLAS call of the chunked row sums: OpenBLAS runs a product of
#: up to 4·65536 on the calling thread alone.
LINEAR_PRODUCT_MAX = 2**18

#: Rows per chunk of the chunked sums (ENCE/UCE bin sums).
PREFIX_CHUNK = 4096

#: Rows per chunk of :meth:`~uqcore.stability.blocks.context.BlockContext.chunk_sums` (the PIT
#: KS search, the calibration tally): at N = 10⁶ 128 was the fastest of 64–1024 for the KS
#: search.
CHUNK = 128

#: The first window of :class:`~uqcore.stability.blocks.search.Local` reaches this far past
#: the expected position: ``LOCAL_MARGIN_FACTOR``·√N + ``LOCAL_MARGIN`` rows.
LOCAL_MARGIN_FACTOR = 8
LOCAL_MARGIN = 1024

#: Whether work that runs in numpy without the GIL and does not touch the block (the random
#: groups of adversarial group calibration) goes to a helper thread while the main thread
#: computes the block's other metrics. The values are the same either way.
BACKGROUND = True
