"""The pydantic model settings every scenario block shares.

strict: YAML's true/1.0/"16" are not silently an int or a bool; no NaN/inf unless a field
says so; unknown keys rejected; the validated models frozen.
"""

from __future__ import annotations

from pydantic import ConfigDict

STRICT = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
"""The ``model_config`` of every scenario model (:mod:`sim.config` and the blocks it holds)."""
