"""Reading data larger than memory for dpfast's Dask path.

See :doc:`/user_guide/large_data`.
"""
from __future__ import annotations

import numpy as np

from dpfast._validation import Int, validate_params

__all__ = ["read_npy_rows"]


def _read_rows(path: str, a: int, b: int):
    # a view of the memory-mapped file (no copy: the pages are read when the kernel touches them)
    return np.load(path, mmap_mode="r")[a:b]


@validate_params(chunk_rows=Int())
def read_npy_rows(path: str, chunk_rows: int):
    """A dask Array over the rows of a 2-d ``.npy`` file, read chunk by chunk from a memory map.

    ``dask.array.from_array(np.load(path, mmap_mode="r"))`` copies the whole array into memory
    (dask calls ``.copy()`` on array-likes), which defeats out-of-core fitting; here every chunk
    is a task that maps the file and returns a view of its rows, so memory stays bounded by the
    chunks in flight and the file is streamed once per pass.

    Parameters
    ----------
    path : str
        A ``.npy`` file holding a 2-d array (``numpy.save``; any real dtype).
    chunk_rows : int
        Rows per chunk (the last chunk holds the rest); every chunk holds all the columns, as
        dpfast's Dask fits require.

    Returns
    -------
    dask.array.Array
        Shape and dtype of the stored array; nothing is read until it is computed.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from dpfast.io import read_npy_rows
    >>> path = os.path.join(tempfile.mkdtemp(), "X.npy")
    >>> np.save(path, np.arange(12.0).reshape(6, 2))
    >>> X = read_npy_rows(path, chunk_rows=4)
    >>> X.chunks
    ((4, 2), (2,))
    >>> float(X.sum().compute())
    66.0
    """
    import dask  # (optional dependency)
    import dask.array as da

    mm = np.load(path, mmap_mode="r")
    if mm.ndim != 2:
        raise ValueError(f"{path} holds a {mm.ndim}-d array; a 2-d (n_samples, n_features) array is needed")
    n, d = mm.shape
    dtype = mm.dtype
    del mm
    parts = [da.from_delayed(dask.delayed(_read_rows, pure=True)(str(path), a, min(a + chunk_rows, n)),
                             (min(a + chunk_rows, n) - a, d), dtype)
             for a in range(0, n, chunk_rows)]
    return da.concatenate(parts, axis=0)
