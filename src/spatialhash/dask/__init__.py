"""The Dask engine: all pairs, radius and k-nearest queries over point sets larger than
one machine, on a Dask cluster, with the answers of `Grid`.

Needs the ``dask`` extra (``pip install "spatialhash[dask]"``: dask's DataFrame,
distributed and pyarrow). The queries run on the scheduler in use: a
``distributed.Client`` when one exists, else Dask's local threads.

Where the code is
-----------------
``_queries.py``: the public functions and a query's path. ``_options.py``: `Output`
(where the rows go) and `Plan` (how the work is cut and run). ``_sources.py``: Parquet
datasets, tables and arrays opened as lazy blocks, checked as they are read.
``_plan.py``: the survey of the data and the tile plan (a k-d tree from a sample).
``_tiles.py``: tagging rows with their tiles and the CPU engine on one tile.
``_knn.py``: k-nearest queries in two rounds. ``_collect.py``: rows gathered to the
client, within set limits. ``_output.py``: Parquet datasets written all or nothing.
``_cluster.py``: memory and threads per worker, and the worker plugin that warms the
kernels.
"""

try:
    import dask.dataframe  # noqa: F401
    import pyarrow  # noqa: F401
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"spatialhash.dask needs the dask extra: pip install \"spatialhash[dask]\" ({error})."
    ) from None

from ._collect import ResultTooLargeError
from ._options import Output, Plan
from ._output import Written
from ._queries import query_knn, query_pairs, query_radius

__all__ = ["Output", "Plan", "ResultTooLargeError", "Written", "query_knn", "query_pairs",
           "query_radius"]
