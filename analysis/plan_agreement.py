"""Do the measured and the predicted run make the same scheduling decisions?

The runtime drives the simulator's own Scheduler (docs/architecture.md: one scheduler, two
clocks), so where no decision depends on time (a burst, a closed loop) the two runs must
plan the same steps, row for row: mode, part, batch size, extend tokens, accepted tokens and
decoding requests of every step. Where requests arrive on a clock (Poisson, gamma, a trace)
an arrival lands between different steps on the two clocks and the plans part after the
first such arrival; that is expected, and the line says where they parted.

`specsched validate` prints :func:`plan_agreement`'s line under its table, so the claim that
differences are the clock's and not the scheduler's is checked on every validation instead
of dug out of ``steps.parquet``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

#: The columns of a results ``steps`` table that a plan fixes (the rest are times).
PLAN_COLUMNS = ("mode", "part", "batch_size", "num_extend_tokens", "accepted_tokens", "decoding_reqs")


@dataclass(frozen=True)
class PlanAgreement:
    """How far two runs' step plans agree.

    ``steps``: rows of each run's steps table (predicted, measured); ``identical``: how many
    leading rows are equal in every :data:`PLAN_COLUMNS` column; ``first_difference``: the
    first differing row of each run as ``column=value`` text (None when one run's rows are a
    prefix of the other's, or all agree); ``retractions``, ``extend_batches`` and
    ``preemptions``: each run's count (extend batches: steps whose main part extends, mixed
    steps included: SGLang's mixed chunk is a prefill batch that carries decode rows,
    scheduler.py ``get_new_batch_prefill`` with ``enable_mixed_chunk``; preemptions: running
    requests a higher priority took the place of, ``num_preemptions``).
    """

    steps: tuple[int, int]
    identical: int
    first_difference: tuple[str, str] | None
    retractions: tuple[int | None, int | None]
    extend_batches: tuple[int, int]
    preemptions: tuple[int | None, int | None] = (None, None)

    @property
    def all_identical(self) -> bool:
        return self.steps[0] == self.steps[1] == self.identical

    def line(self) -> str:
        """One line for the terminal, e.g. ``step plans: 263 of 263 rows identical
        (retractions 3 / 3, extend batches 12 / 12; predicted / measured)``."""
        (p, m), (rp, rm), (ep, em) = self.steps, self.retractions, self.extend_batches
        counts = f"retractions {_n(rp)} / {_n(rm)}, extend batches {ep} / {em}"
        if any(self.preemptions):   # said where a run preempted (priority scheduling)
            counts += f", preemptions {_n(self.preemptions[0])} / {_n(self.preemptions[1])}"
        counts += "; predicted / measured"
        if self.all_identical:
            return f"step plans: {p} of {p} rows identical ({counts})"
        head = f"step plans: the first {self.identical} of {p} / {m} rows identical"
        if self.first_difference is not None:
            head += f", then predicted {self.first_difference[0]} vs measured {self.first_difference[1]}"
        return f"{head} ({counts}); runs whose requests arrive on a clock part where an arrival lands between steps"


def _n(v: int | None) -> str:
    return "n/a" if v is None else str(v)


def _row_text(row: pd.Series, cols: list[str]) -> str:
    return " ".join(f"{c}={row[c]}" for c in cols)


def plan_agreement(predicted_steps: pd.DataFrame, measured_steps: pd.DataFrame,
                   predicted_summary: dict[str, Any] | None = None,
                   measured_summary: dict[str, Any] | None = None) -> PlanAgreement:
    """Compare two results ``steps`` tables (rows in step order) on :data:`PLAN_COLUMNS`
    (those both tables have); summaries give ``num_retractions`` where known.

    Raises ValueError when the tables share none of the plan columns (not steps tables)."""
    cols = [c for c in PLAN_COLUMNS if c in predicted_steps.columns and c in measured_steps.columns]
    if not cols:
        raise ValueError(f"not results steps tables: neither has all of {', '.join(PLAN_COLUMNS)}")
    a = predicted_steps[cols].reset_index(drop=True)
    b = measured_steps[cols].reset_index(drop=True)
    n = min(len(a), len(b))
    # leading rows equal in every column: the first row where any differs ends the prefix
    same = (a.iloc[:n].to_numpy() == b.iloc[:n].to_numpy()).all(axis=1)
    identical = int(n if same.all() else same.argmin())
    first = None if identical == n else (_row_text(a.iloc[identical], cols), _row_text(b.iloc[identical], cols))

    def extends(t: pd.DataFrame) -> int:
        main = t["part"] == "main" if "part" in t.columns else True
        return int((t["mode"].isin(("extend", "mixed")) & main).sum()) if "mode" in t.columns else 0

    def count(s: dict[str, Any] | None, key: str) -> int | None:
        v = (s or {}).get(key)
        return int(v) if isinstance(v, (int, float)) and v == v else None

    return PlanAgreement(steps=(len(a), len(b)), identical=identical, first_difference=first,
                         retractions=(count(predicted_summary, "num_retractions"),
                                      count(measured_summary, "num_retractions")),
                         extend_batches=(extends(predicted_steps), extends(measured_steps)),
                         preemptions=(count(predicted_summary, "num_preemptions"),
                                      count(measured_summary, "num_preemptions")))
