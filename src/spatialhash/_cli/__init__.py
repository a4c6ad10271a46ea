"""The command line's parts, one module per command family (``spatialhash.cli`` wires them).

- `common`: the error that ends a command with a message, optional imports, progress bars.
- `readers`: point files (.npy, .csv, .parquet) into validated float64 arrays.
- `writers`: result tables streamed to .npy, .csv or .parquet, atomically.
- `queries`: ``pairs``, ``neighbors`` and ``knn``.
- `info`, `bench`, `demo`: the other commands; `compile_kernels`: ``compile``.
"""
