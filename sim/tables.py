"""A run's result object, its tables held as numpy columns until a DataFrame is asked for.

A run records its rows in typed columns (:mod:`sim.records`) and hands each table over as
:class:`Columns`. :class:`RunResult` turns a table into a pandas DataFrame the first time the
table is read as one (``result.requests``). The summary (:mod:`sim.metrics`), the
bench_serving line (:mod:`sim.bench_serving`) and the parquet writer (:mod:`sim.results`)
read the columns directly (:func:`column`), so ``specsched run`` never imports pandas: that
import was ~0.1 s of the whole command's CPU (docs/performance.md, "Command start-up"). A
DataFrame built later is the one built at once (the same constructor on the same arrays).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

TABLE_NAMES = ("requests", "chunks", "steps", "timeseries")


class Columns:
    """One table as named numpy columns of equal length (column order = insertion order).

    It answers what the run's own readers ask of a table: ``len()`` (rows), ``empty``,
    ``columns``, ``name in table`` and ``table[name]`` (the column, a numpy array).

    Args:
        data: column name -> 1-D array; every array has the same length.

    Raises:
        ValueError: the columns differ in length.
    """

    __slots__ = ("data", "_rows")

    def __init__(self, data: dict[str, np.ndarray]) -> None:
        lengths = {len(v) for v in data.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of one table differ in length: {sorted(lengths)}")
        self.data = data
        self._rows = lengths.pop() if lengths else 0

    def __len__(self) -> int:
        return self._rows

    def __getitem__(self, name: str) -> np.ndarray:
        return self.data[name]

    def __contains__(self, name: object) -> bool:
        return name in self.data

    @property
    def empty(self) -> bool:
        """True when the table has no rows (as ``DataFrame.empty``)."""
        return self._rows == 0

    @property
    def columns(self) -> list[str]:
        return list(self.data)

    def frame(self) -> pd.DataFrame:
        """The table as a DataFrame (pandas imported here)."""
        import pandas as pd

        return pd.DataFrame(self.data, columns=list(self.data))


def column(table: Any, name: str, dtype: Any = None) -> np.ndarray:
    """Column ``name`` of a table (:class:`Columns` or DataFrame) as a numpy array
    (``dtype`` as ``Series.to_numpy``'s)."""
    c = table[name]
    if hasattr(c, "to_numpy"):
        return c.to_numpy(dtype)
    return c if dtype is None else np.asarray(c, dtype)


def notna(table: Any, name: str) -> np.ndarray:
    """Bool array: where column ``name`` holds a value (``Series.notna`` on a DataFrame; on
    :class:`Columns`, not NaN for float columns, everything for the others)."""
    c = table[name]
    if hasattr(c, "notna"):
        return c.notna().to_numpy()
    c = np.asarray(c)
    return ~np.isnan(c) if c.dtype.kind == "f" else np.ones(len(c), dtype=bool)


class RunResult:
    """One run, simulated, measured or read back from a results directory: the tables
    (times in seconds from the run's start) and the bench_serving summary (dict, ms for
    latencies). Columns are listed in docs/architecture.md.

    Args and attributes:
        requests, chunks, steps, timeseries: the tables, each a pandas DataFrame or
            :class:`Columns`; the attributes always give DataFrames (built from the columns on
            first access and kept). :meth:`table` gives the table as held, without pandas.
        summary: the summary (:func:`specsched.sim.metrics.summarize` plus run facts).
        scenario: the resolved scenario (a ``Scenario``, or its plain dict when read back).
        extra: run facts that are not table columns (record level, step count, ...).
        path: the results directory it was read from (None for a run in memory).
        derived: figures computed from the tables on first use and kept (the tables do not
            change after a run).
    """

    def __init__(self, requests: Any, chunks: Any, steps: Any, timeseries: Any, summary: dict[str, Any],
                 scenario: Any = None, extra: dict[str, Any] | None = None, path: Path | None = None) -> None:
        self._tables: dict[str, Any] = {"requests": requests, "chunks": chunks, "steps": steps,
                                        "timeseries": timeseries}
        self.summary = summary
        self.scenario = scenario
        self.extra = {} if extra is None else extra
        self.path = path
        # figures derived from the tables once and reused (bench_serving's peaks: the printed
        # table and bench_serving.jsonl each need them; a burst's take ~50 ms)
        self.derived: dict[str, Any] = {}

    def table(self, name: str) -> Any:
        """Table ``name`` as held: :class:`Columns` (a run in memory) or a DataFrame."""
        return self._tables[name]

    def _frame(self, name: str) -> pd.DataFrame:
        t = self._tables[name]
        if type(t) is Columns:
            t = self._tables[name] = t.frame()
        return t

    def _set(self, name: str, value: Any) -> None:
        self._tables[name] = value

    requests = property(lambda self: self._frame("requests"), lambda self, v: self._set("requests", v),
                        doc="One row per request (DataFrame).")
    chunks = property(lambda self: self._frame("chunks"), lambda self, v: self._set("chunks", v),
                      doc="One row per delivery of tokens to a client (DataFrame).")
    steps = property(lambda self: self._frame("steps"), lambda self, v: self._set("steps", v),
                     doc="One row per forward launched (DataFrame).")
    timeseries = property(lambda self: self._frame("timeseries"), lambda self, v: self._set("timeseries", v),
                          doc="One row per scheduling pass (DataFrame).")

    def __repr__(self) -> str:
        rows = ", ".join(f"{n}={len(t)} rows" for n, t in self._tables.items())
        return f"RunResult({rows}, summary={len(self.summary or {})} keys, path={self.path!r})"
