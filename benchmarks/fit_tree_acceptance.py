"""A chain drafter's acceptance across draft trees, fitted from bench_serving lines.

    python benchmarks/fit_tree_acceptance.py RUNS.jsonl [MORE.jsonl ...]

Every line of the files is a run of one EAGLE-family server (SGLang 0.5.5+ writes its
``server_info``: the resolved ``speculative_num_steps``, ``speculative_eagle_topk`` and
``speculative_num_draft_tokens``) with its ``accept_length``. Runs are grouped by draft tree;
a group's accept length is the mean of its runs'. The narrowest and the widest tree (by draft
tokens, then topk) give the draft's rank-1 rate p (the same at every depth) and the sibling
rate (:func:`sim.draft_tree.fit_sibling_rate`), printed as the scenario's acceptance block
(``per_position_rates`` over the deepest tree's steps and ``sibling_rate``), with each
tree's measured and modelled accept length (the trees between the two are a check).

Needs two trees of one drafter, one wider than a chain (topk > 1). A measured accept length is
a population's (requests accept differently); it is fitted as one request's, so a scenario
with ``request_spread`` > 0 reports a little less on the same trees. A run without its tree
(no ``server_info``, or another algorithm) is left out with a ``warning:`` line; a file or a
set of runs that cannot be fitted is one line, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from specsched.sim.bench_serving import read_bench_runs
from specsched.sim.draft_tree import fit_sibling_rate, tree_mean
from specsched.sim.errors import ConfigError
from specsched.sim.server_args import SpecAlgorithm, chain_window_reset


def tree_of(info: dict) -> tuple[int, int, int] | None:
    """``(topk, num_draft_tokens, steps)`` of a line's ``server_info`` as SGLang runs it (a
    chain's draft tokens reset to steps + 1: :func:`sim.server_args.chain_window_reset`), or
    None (no chain drafter, or its tree not stated)."""
    try:
        algo = SpecAlgorithm(str(info.get("speculative_algorithm") or "none").lower())
    except ValueError:
        return None
    steps, topk, n = (info.get(k) for k in ("speculative_num_steps", "speculative_eagle_topk",
                                           "speculative_num_draft_tokens"))
    if not algo.enabled or algo.is_block or not isinstance(steps, int) or steps < 1:
        return None
    n = chain_window_reset(algo, steps, topk) or n
    topk = topk if isinstance(topk, int) and topk >= 1 else 1
    if not isinstance(n, int) or n < 2:
        return None
    return topk, n, steps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path, help="bench_serving result files (.jsonl)")
    a = ap.parse_args(argv)
    groups: dict[tuple[int, int, int], list[float]] = defaultdict(list)
    for f in a.files:
        if not f.is_file():
            raise ConfigError("<command line>", "files", str(f), "does not exist: give bench_serving result files")
        for run in read_bench_runs(f):
            tree = tree_of(run.extra.get("server_info") or {})
            acc = run.summary.get("accept_length")
            if tree is None or acc is None or not np.isfinite(acc) or acc <= 1.0:
                print(f"warning: {run.source}: left out: no chain drafter's tree in its server_info "
                      "(speculative_algorithm, speculative_num_steps, speculative_eagle_topk, "
                      "speculative_num_draft_tokens) or no accept_length above 1", file=sys.stderr)
                continue
            groups[tree].append(float(acc))
    trees = sorted(groups, key=lambda t: (t[1], t[0], t[2]))
    if len(trees) < 2 or max(t[0] for t in trees) == 1:
        raise ConfigError("<command line>", "files", ", ".join(map(str, a.files)),
                          f"runs on {len(trees)} draft tree(s) ({', '.join(f'{k}/{n}' for k, n, _ in trees) or 'none'} "
                          "topk/draft tokens): the sibling rate needs two trees of one drafter, one wider than a chain")
    means = {t: float(np.mean(groups[t])) for t in trees}
    lo, hi = trees[0], trees[-1]
    try:
        p, theta = fit_sibling_rate((*lo, means[lo]), (*hi, means[hi]))
    except ValueError as e:
        raise ConfigError("<command line>", "files", ", ".join(map(str, a.files)), str(e)) from None
    depth = max(t[2] for t in trees)
    print("acceptance:")
    print(f"  per_position_rates: [{', '.join([f'{p:.4f}'] * depth)}]")
    print(f"  sibling_rate: {theta:.4f}")
    print("# tree (steps/topk/draft tokens): measured accept length (runs) -> modelled")
    for t in trees:
        k, n, steps = t
        model = tree_mean(np.full(steps, p), theta, k, n)
        mark = " (fitted)" if t in (lo, hi) else ""
        print(f"#   {steps}/{k}/{n}: {means[t]:.3f} ({len(groups[t])}) -> {model:.3f}{mark}")
    return 0


def cli(argv: list[str] | None = None) -> int:
    """:func:`main`, a user's bad input as one line and exit 2."""
    from specsched.sim.errors import one_line_on_bad_input

    return one_line_on_bad_input(main, argv)


if __name__ == "__main__":
    sys.exit(cli())
