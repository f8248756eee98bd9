"""specsched.analysis: plots, arm comparisons and parameter sweeps over simulator results.

Everything here reads the results-directory format of ``docs/architecture.md`` (or the
in-memory ``RunResult`` with the same tables) and stays outside the simulator core:

- :mod:`analysis.io`: read/write a results directory (read back as the simulator's ``RunResult``).
- :mod:`analysis.stats`: ECDFs, bench_serving ITL samples, percentiles, confidence intervals.
- :mod:`analysis.overrides`: load a scenario with dotted-key overrides (``server.x=1``).
- :mod:`analysis.plots`: matplotlib figures (TTFT/TPOT/ITL, timeline, verify split, arm bars).
- :mod:`analysis.compare`: run arms over seeds and compare them with bootstrap CIs.
- :mod:`analysis.sweep`: run a parameter grid x seeds on a concurrent.futures/Dask executor.
- :mod:`analysis.cli_commands`: the ``plot``, ``compare`` and ``sweep`` subcommands.
- :mod:`analysis.synthetic`: a tiny stand-in model that produces results in the same format
  (for tests and demos of the analysis code; not a prediction of anything).
"""
