"""A scenario from a bench_serving run: its workload, and its server where the line says.

``specsched scenario from-bench FILE[:LINE] --profile P`` (:func:`scenario_from_bench`).
The mapping follows SGLang's bench_serving (0.5.23 ``sglang/benchmark/serving.py`` and
``benchmark/datasets/``):

- arrivals: ``request_rate`` inf and no ``max_concurrency`` -> ``burst`` (all sent at t=0);
  inf with ``max_concurrency`` C -> ``closed_loop`` with concurrency C (each finished request
  lets the next one in, its timer starting then: bench_serving's semaphore); a finite rate
  -> ``poisson`` (exponential gaps, ``get_request``) with ``max_concurrency``; with
  ``--burstiness`` (or a vLLM file's ``burstiness`` other than 1) gamma gaps of that shape
  and mean 1/rate (vLLM's option; SGLang 0.5.23 has none; a vLLM line's burstiness at rate
  inf shaped nothing and is ignored, said in the notes); a ``vllm bench serve`` line
  (``endpoint_type``, no ``best_of``) also gets ``normalize_arrivals`` (0.10.0+ rescale the
  sends to end at num_prompts / rate). ``request_rate: "trace"`` cannot
  be rebuilt from SGLang's line (write a ``trace`` workload for the trace file instead; a line
  that holds its send times, ``start_times``, as specsched's own trace runs write, replays them), nor can
  vLLM's ``--ramp-up-strategy`` runs (the rate changes during the run), nor SGLang's
  multi-turn replays other than ``agentic-trace``
  (``generated-shared-prefix --gsp-num-turns N``: the line has no turn count;
  :func:`sim.bench_serving.multi_turn_replay`).
- requests: ``num_prompts`` (vLLM), else the details' count, else ``completed``; when fewer
  completed (failed requests), the ``completed`` ones, and a finite rate x their share
  (:func:`successes`: bench_serving counts only successful requests in ``completed``, the
  token totals and the throughputs, over the whole run's duration).
- lengths, ``random``/``random-ids``: ``uniform`` with ``range_ratio`` = random_range_ratio:
  integers in [max(1, int(len x ratio)), len] as SGLang 0.5.23 draws them
  (``compute_random_lens``; default ratio 0.0 = [1, len]). SGLang 0.3.0-0.5.6 drew inputs the
  same way but outputs from [int(len x ratio), len] (``sample_random_requests``; 0.5.7 moved
  both to ``compute_random_lens``) (0 possible at ratio 0; a server still
  returns >= 1 token, which is what the model sends). Ratio 1 -> ``fixed``. vLLM's newer
  ``vllm bench serve`` changed the meaning to [len x (1 - r), len x (1 + r)] and does not
  write the length arguments to its result file: such files get lengths from the details.
  (SGLang also shortens each random prompt by the tokenizer's special tokens when sending
  text; that 1-2 token difference is not modelled.)
- ``sharegpt``: the run's own lengths when it has details (as other datasets, below), else
  the shipped ShareGPT-like histograms (``sharegpt-like-lengths-*.csv``) scaled to the
  line's tokens per completed request (:func:`_sharegpt_lengths`); outputs fixed at
  ``sharegpt_output_len`` when given.
- ``generated-shared-prefix`` consistent with SGLang 0.5.23's ``--gsp-*`` defaults (which the
  line does not write; :func:`_gsp_defaults`): a ``shared_prefix`` workload at those defaults.
- other datasets, or ``--lengths details``: histograms of the run's own ``input_lens`` /
  ``output_lens`` written beside the YAML; a line with neither length arguments nor details
  (vLLM without ``--save-detailed``, SGLang's other datasets) gets fixed lengths at its mean
  tokens per completed request (``total_input_tokens`` / ``completed``, likewise output),
  said in the assumptions (:func:`_mean_lengths`).
- server: ``--template`` scenario's ``server``/``acceptance``, else the line's
  ``server_info`` (SGLang's /server_info: its server arguments) for every key the model
  has, the keys it has no argument for named in the assumptions; speculative
  ``accept_length`` (or server_info's ``internal_states[0].avg_spec_accept_length``) ->
  ``acceptance.mean_accept_length``; when the line has an accept length but names no
  drafter (no server_info, or one without a usable ``speculative_algorithm``), EAGLE with
  SGLang's own choice for the profile's model (``hardware.architecture``: 5/4/8 for Llama,
  else 3/1/4) is assumed and said so (:func:`_assumed_drafter`).
- ``reference``: the line's headline metrics, so ``specsched run`` prints them beside the
  prediction.
- ``agentic-trace`` (SGLang 0.5.23 benchmark/datasets/agentic_trace.py): a ``multi_turn``
  workload replaying the trace file (``--dataset-path``: SGLang writes no path, offset or
  turn cap into the line) with ``--dataset-offset`` and ``--agentic-max-turns``; each turn asks
  ``sharegpt_output_len`` tokens (220 when null, ``DEFAULT_AGENTIC_OUTPUT_LEN``); a
  conversation holds a ``max_concurrency`` slot from its first turn to its last
  (benchmark/serving.py: the semaphore wraps ``wrap_multi_turn_request_func``), all of them at
  once without one. The number of conversations (``--num-prompts``) is not written either:
  without the option it is the count whose turns add up to the line's requests (the
  details' count, else ``completed``), and the line is refused when no count does
  (:func:`_agentic_workload`). A finite request rate starts the conversations at that rate
  (``workload.request_rate``: exponential gaps, as ``get_request`` yields the multi-turn rows).
- ``mooncake`` (SGLang 0.5.23 benchmark/datasets/mooncake.py; sent at the trace's timestamps
  whatever ``request_rate`` says: :data:`MOONCAKE_DATASET`): a ``trace`` workload of the trace
  file's rows (``--dataset-path``; the line names no file), their rounds
  (``--mooncake-num-rounds``) and slowdown (``--mooncake-slowdown-factor``), prompts of the
  line's own lengths or its input total, and ``hash_ids`` as shared prompt blocks
  (:func:`_mooncake_workload`).
- ``--arrivals details``: the run's own arrivals (vLLM's ``start_times`` less ``queue_times``)
  and lengths as a ``trace`` workload written beside the YAML, so the prediction sees the
  arrivals the server saw instead of another draw at the same rate.
"""

from __future__ import annotations

import copy
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from pydantic import ValidationError
from specsched.sim.atomic import is_path_component
from specsched.sim.bench_serving import GSP_DATASET, ONE_BATCH, BenchRun, multi_turn_replay
from specsched.sim.config import (
    Scenario,
    ServerArgs,
    SpecAlgorithm,
    _resolve_arm,
    load_scenario,
    validation_error,
)
from specsched.sim.dp_dispatch import resolve_method
from specsched.sim.errors import ConfigError, FieldError, clipped
from specsched.sim.profile import analytic_costs, load_profile
from specsched.sim.server_args import (
    CHAIN_PARAM_KEYS,
    MAX_DRAFT_TOKENS,
    AdmissionDelay,
    auto_speculative_basis,
    auto_speculative_params,
)
from specsched.sim.sglang_launch_args import SERVER_STATE, UNMODELLED, is_inert, same_setting
from specsched.sim.workload import histogram

REFERENCE_KEYS = (
    "output_throughput", "request_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
    "median_tpot_ms", "median_itl_ms", "median_e2e_latency_ms", "accept_length",
    "duration", "max_ttft_ms", "prefill_window_input_throughput", "decode_window_output_throughput",
)
SHAREGPT_INPUT = "sharegpt-like-lengths-input.csv"
SHAREGPT_OUTPUT = "sharegpt-like-lengths-output.csv"
MOONCAKE_DATASET = "mooncake"
"""SGLang bench_serving's Mooncake trace replay (0.5.23 ``benchmark/serving.py`` ``benchmark()``:
with backend ``sglang`` the rows go through ``get_mooncake_request_over_time``
(``benchmark/datasets/mooncake.py``), which sleeps to each trace row's ``timestamp`` (ms) x
``--mooncake-slowdown-factor``, ignoring ``--request-rate``, and sends its
``--mooncake-num-rounds`` rounds together, each prompt built from the row's ``hash_ids``
(``"{id}" + 128 x "hi"`` per id) rather than its ``input_length``; the line writes
``request_rate`` as given, ``Infinity`` by default). :func:`scenario_from_bench` rebuilds it from
the trace file (:func:`_mooncake_workload`); it was built as a burst, then refused."""
SHARED_PREFIX_DATASETS = (GSP_DATASET, "prefix_repetition")
"""Datasets whose prompts share prefixes by construction: SGLang bench_serving's
``generated-shared-prefix`` (benchmark/datasets/generated_shared_prefix.py, ``gsp_*``
arguments) and vLLM's ``prefix_repetition``; neither writes its sharing into the result line."""


def random_length_args(run: BenchRun) -> dict[str, tuple[Any, Any]] | None:
    """``{"input": (len, ratio), "output": (len, ratio)}`` that a ``random``/``random-ids``
    line asked bench_serving for (``--random-input-len``, ``--random-output-len``,
    ``--random-range-ratio``, SGLang's default ratio 0.0 when absent; specsched's own lines
    carry one ratio per side when they differ), or None for another dataset or a line
    without the length arguments. Values unchecked: :func:`_lengths` refuses bad ones."""
    a = run.args
    if not (str(a.get("dataset_name") or "").startswith("random") and "random_input_len" in a
            and "random_output_len" in a):
        return None
    r = a.get("random_range_ratio", 0.0)   # SGLang's default
    return {s: (a[f"random_{s}_len"], run.extra.get(f"random_{s}_range_ratio", r)) for s in ("input", "output")}


def _lengths(run: BenchRun, mode: str) -> tuple[dict[str, Any], dict[str, Any], list[str], dict[str, pd.DataFrame]]:
    """(input_len, output_len, assumptions, histogram tables to write)."""
    a = run.args
    ds = a.get("dataset_name", "")
    notes: list[str] = []
    spec = random_length_args(run) if mode == "args" else None
    if spec is not None:
        rin, rout = spec["input"][1], spec["output"][1]
        if "random_range_ratio" not in a and not ({"random_input_range_ratio", "random_output_range_ratio"} <= set(run.extra)):
            notes.append("random_range_ratio absent from the line: SGLang's default 0.0 assumed ([1, len])")

        # what bench_serving itself would refuse (a ratio above 1 makes compute_random_lens's
        # randint(int(len x ratio), len + 1) raise) is refused here, not read as fixed lengths
        for side, v in (("input", rin), ("output", rout)):
            key = f"random_{side}_range_ratio" if f"random_{side}_range_ratio" in run.extra else "random_range_ratio"
            if not isinstance(v, int | float) or isinstance(v, bool) or not 0 <= v <= 1:
                raise ConfigError(run.source, key, v, "must be a number in [0, 1] (bench_serving --random-range-ratio)")
        for key in ("random_input_len", "random_output_len"):
            if not isinstance(a[key], int) or a[key] < 1:
                raise ConfigError(run.source, key, a[key], "must be an integer >= 1 (tokens)")

        def dist(v: int, r: float) -> dict[str, Any]:
            return {"kind": "fixed", "value": v} if r >= 1 else {"kind": "uniform", "value": v, "range_ratio": r}

        notes.append(f"lengths: bench_serving random, uniform integers in [max(1, int(len x ratio)), len], ratio "
                     f"{rin:g} (input) / {rout:g} (output) (SGLang 0.5.23 compute_random_lens)"
                     + ("; ratio 1 is one length: written as kind fixed" if max(rin, rout) >= 1 else ""))
        out, tables = _short_outputs(run, a["random_output_len"], rout, notes)
        return dist(a["random_input_len"], rin), out or dist(a["random_output_len"], rout), notes, tables
    if mode == "args" and ds == "sharegpt" and (run.details is None or not run.details.ok.any()):
        return _sharegpt_lengths(run, notes)
    if mode == "args" and ds == IMAGE_DATASET and run.details is None:
        image = _image_lengths(run, notes)
        if image is not None:
            return image
    if ds in SHARED_PREFIX_DATASETS:
        notes.append(f"prefixes: dataset {ds!r} sends prompts that share system prompts (its group and length "
                     "arguments are not in the line); the scenario's prompts share nothing, so its prefix cache "
                     "finds no hit: state them under workload.shared_prefix")
    d = run.details
    if d is None and mode == "details":   # asked for, as --arrivals details is: not a silent fallback
        raise ConfigError("<command line>", "--lengths", "details", f"needs the line's per-request details "
                          f"(bench_serving --output-details, vllm --save-detailed); {run.source} has none: leave "
                          "--lengths out (the lengths then come from the line's arguments or its means)")
    if d is None:
        means = _mean_lengths(run)
        if means is None:
            raise ConfigError(run.source, "dataset_name", ds or "<missing>",
                              "lengths need random_input_len/random_output_len (random), sharegpt, the per-request "
                              "details (--output-details), or total_input_tokens, total_output_tokens and completed")
        notes.append(f"lengths: fixed at the run's mean tokens per completed request, {means[0]} in / {means[1]} out "
                     f"(the line has no length arguments{' for dataset ' + repr(ds) if ds else ''} and no per-request "
                     "details; the real spread is unknown)")
        return {"kind": "fixed", "value": means[0]}, {"kind": "fixed", "value": means[1]}, notes, {}
    ok = d.ok
    if not ok.any():   # empty histograms made a scenario that no run could read
        raise ConfigError(run.source, "errors", "every request failed", "no successful request to take lengths from")
    tables = {}
    for key, values in (("input", d.input_lens[ok]), ("output", d.output_lens[ok])):
        vc = pd.Series(values).clip(lower=1).value_counts().sort_index()
        tables[key] = pd.DataFrame({"length": vc.index.astype(int), "weight": vc.to_numpy(int)})
    notes.append(f"lengths: histograms of the run's own {int(ok.sum())} successful requests (--output-details)")
    counted, asked = float(np.sum(d.input_lens[ok])), run.summary.get("total_input_tokens")
    if isinstance(asked, (int, float)) and asked > 0 and abs(counted - asked) > 0.005 * asked:
        notes.append(f"input lengths: the details' input_lens add up to {counted:.0f} tokens, the line's "
                     f"total_input_tokens {asked:.0f} ({100 * (counted / asked - 1):+.1f} %): SGLang 0.5.23 writes each "
                     "request's prompt as the server counted it into input_lens (benchmark/serving.py "
                     "_record_server_prompt_len: BOS, chat template, the random text re-tokenized) but sums the "
                     "dataset's asked lengths into total_input_tokens (calculate_metrics); the scenario prefills the "
                     "server's counts, so its input totals and throughputs differ from the line's by as much")
    return {"kind": "file", "path": "<input>"}, {"kind": "file", "path": "<output>"}, notes, tables


IMAGE_DATASET = "image"
"""SGLang bench_serving's synthetic image dataset (0.5.23 ``benchmark/datasets/image.py``
``sample_image_requests``): text and output lengths drawn by the random dataset's rule
(``compute_random_lens`` with ``--random-input-len``/``--random-output-len`` and
``--random-range-ratio``), images added to each prompt (``prompt_len`` = text + vision tokens)."""


def _image_lengths(run: BenchRun, notes: list[str]) -> tuple[dict[str, Any], dict[str, Any], list[str],
                                                              dict[str, pd.DataFrame]] | None:
    """An ``image`` line without details (:data:`IMAGE_DATASET`): outputs drawn as bench_serving
    drew them, uniform integers in [max(1, int(len x ratio)), len] of ``random_output_len``
    (or the measured mean where they stopped early, :func:`_short_outputs`); prompts fixed at
    the line's input tokens per completed request, since their vision tokens depend on the
    processor and the image size, which the line does not write. None when the line lacks the
    output-length argument or the totals (the caller then fixes both at the means).

    Raises:
        ConfigError: ``random_output_len`` not an integer >= 1 or ``random_range_ratio`` not in
            [0, 1] (what bench_serving itself refuses)."""
    a = run.args
    means = _mean_lengths(run)
    if "random_output_len" not in a or means is None:
        return None
    length, ratio = a["random_output_len"], a.get("random_range_ratio", 0.0)
    if not isinstance(ratio, int | float) or isinstance(ratio, bool) or not 0 <= ratio <= 1:
        raise ConfigError(run.source, "random_range_ratio", ratio, "must be a number in [0, 1] (bench_serving --random-range-ratio)")
    if not isinstance(length, int) or isinstance(length, bool) or length < 1:
        raise ConfigError(run.source, "random_output_len", length, "must be an integer >= 1 (tokens)")
    notes.append(f"lengths: dataset 'image' draws outputs by bench_serving's random rule, uniform integers in "
                 f"[max(1, int(len x ratio)), len] of random_output_len {length}, ratio {ratio:g} (SGLang 0.5.23 "
                 f"sample_image_requests); prompts fixed at the run's mean, {means[0]} tokens a completed request "
                 "(the images' tokens depend on the processor and the image size, which the line does not write; no "
                 "per-request details)")
    out, tables = _short_outputs(run, length, ratio, notes)
    if out is None:
        out = {"kind": "fixed", "value": length} if ratio >= 1 else {"kind": "uniform", "value": length, "range_ratio": ratio}
    return {"kind": "fixed", "value": means[0]}, out, notes, tables


def _sharegpt_lengths(run: BenchRun, notes: list[str]) -> tuple[dict[str, Any], dict[str, Any], list[str],
                                                                  dict[str, pd.DataFrame]]:
    """A ``sharegpt`` line without per-request details: the shipped ShareGPT-like histograms,
    each scaled to the line's own tokens per completed request when it has its totals
    (:func:`_mean_lengths`); outputs fixed at ``sharegpt_output_len`` when given (bench_serving
    asks that many tokens of every request and ignores EOS by default).

    Why scaled: which ShareGPT file, which of its conversations (``--num-prompts``, the
    dataset's seed, prompts longer than the context dropped) and the tokenizer set the run's
    lengths; the line's totals are what the server was sent and returned, and a histogram of
    other means priced another workload (a line of 100 output tokens a request replayed at the
    histogram's ~200: +100 % output tokens). The shape stays the shipped one. A line with
    details never comes here: its own lengths are the histograms (:func:`_lengths`)."""
    a = run.args
    specs: dict[str, dict[str, Any]] = {"input": {"kind": "file", "path": SHAREGPT_INPUT}, "output": (
        {"kind": "fixed", "value": a["sharegpt_output_len"]} if a.get("sharegpt_output_len")
        else {"kind": "file", "path": SHAREGPT_OUTPUT})}
    notes.append("lengths: the shipped ShareGPT-like histograms (synthetic, approximating public ShareGPT statistics)")
    means = _mean_lengths(run)
    tables: dict[str, pd.DataFrame] = {}
    for (side, spec), target in zip(specs.items(), means or (), strict=False):
        if spec["kind"] != "file":
            continue
        lengths, p = histogram(spec["path"], None, f"workload.{side}_len")
        shipped_mean = float(lengths @ p)
        factor = target / shipped_mean
        scaled = pd.DataFrame({"length": np.maximum(1, np.rint(lengths * factor)).astype(np.int64), "weight": p})
        tables[side] = scaled.groupby("length", as_index=False)["weight"].sum()
        specs[side] = {"kind": "file", "path": f"<{side}>"}
        notes.append(f"{side} lengths scaled x{factor:.3f} to the line's {target} tokens per completed request "
                     f"(total_{side}_tokens / completed; the histogram's own mean {shipped_mean:.0f})")
    if means is None:
        notes.append("lengths: the line has no total_input_tokens/total_output_tokens/completed to scale them to")
    return specs["input"], specs["output"], notes, tables


SHORT_OUTPUT_SE = 4.0
"""How many standard errors of the mean (the uniform draw's spread over ``completed`` requests)
a random line's output tokens per completed request may fall below the arguments' mean before
the run is taken to have stopped its outputs early (:func:`_short_outputs`); at least 2 %."""


def _short_outputs(run: BenchRun, length: int, ratio: float, notes: list[str]) -> tuple[dict[str, Any] | None, dict[str, pd.DataFrame]]:
    """The output lengths of a ``random`` line whose requests generated fewer tokens than its
    arguments ask, or (None, {}) when they did not.

    bench_serving asks each request for exactly its drawn ``random_output_len`` (``ignore_eos``
    on, 0.5.23 benchmark/serving.py), so the output tokens per completed request
    (``total_output_tokens / completed``) sit at the draw's mean, (max(1, int(len x ratio)) +
    len) / 2, within its sampling spread. Well below it the outputs stopped early:
    ``--disable-ignore-eos`` (each output ends at the model's end-of-sequence token), or a
    server that does not honour ``ignore_eos`` (a prompt past the context length is refused
    whole, 0.5.23 tokenizer_manager.py ``_validate_one_request``, a failed request, not a short
    one). Built from the arguments, the scenario generated
    every requested token (several times the measured output, and as many decode steps).
    Then the successful requests' ``output_lens`` (details) give the output histogram, else
    the measured mean as a fixed length; said in the notes."""
    n, tout = run.summary.get("completed"), run.summary.get("total_output_tokens")
    if not n or tout is None:
        return None, {}
    lo = max(1, int(length * ratio))
    want, got = (lo + length) / 2, tout / n
    se = (length - lo) / math.sqrt(12 * n)
    if got >= want - max(SHORT_OUTPUT_SE * se, 0.02 * want):
        return None, {}
    why = (f"outputs: {got:.1f} tokens per completed request where the arguments ask {want:g} on average: the "
           "outputs stopped early (bench_serving --disable-ignore-eos: at the end-of-sequence token; or a server "
           "that does not honour ignore_eos)")
    d = run.details
    if d is not None and (d.ok & (d.output_lens > 0)).any():
        ok = d.ok & (d.output_lens > 0)
        vc = pd.Series(d.output_lens[ok]).value_counts().sort_index()
        notes.append(f"{why}; output lengths: the histogram of the run's {int(ok.sum())} successful requests")
        return {"kind": "file", "path": "<output>"}, {
            "output": pd.DataFrame({"length": vc.index.astype(int), "weight": vc.to_numpy(int)})}
    notes.append(f"{why}; output lengths fixed at that mean, {max(1, round(got))} (no per-request details: the "
                 "real spread is unknown)")
    return {"kind": "fixed", "value": max(1, round(got))}, {}


GSP_DEFAULTS = {"num_groups": 64, "prompts_per_group": 16, "system_prompt_len": 2048, "question_len": 128,
                "output_len": 256, "range_ratio": 1.0}
"""SGLang 0.5.23 bench_serving's ``--gsp-*`` defaults (``benchmark/serving.py`` argparse:
``--gsp-num-groups`` 64, ``--gsp-prompts-per-group`` 16, ``--gsp-system-prompt-len`` 2048,
``--gsp-question-len`` 128, ``--gsp-output-len`` 256, ``--gsp-range-ratio`` 1.0, one turn,
uniform groups, shuffled). The dataset ignores ``--num-prompts``: it sends groups x prompts
per group requests."""
GSP_INPUT_SLACK = 0.05
"""How far (share) a ``generated-shared-prefix`` line's median server-counted prompt may sit
from system + question tokens and still be taken as the defaults' prompts: the server adds
its special tokens and the ``"\\n\\n"`` joining them (``sample_generated_shared_prefix_requests``),
a few tokens."""


def _gsp_defaults(run: BenchRun, n: int) -> tuple[dict[str, Any], dict[str, Any], str] | None:
    """(``workload.shared_prefix``, ``workload.output_len``, note) for a
    ``generated-shared-prefix`` line that is consistent with SGLang's defaults
    (:data:`GSP_DEFAULTS`; the line writes none of its ``--gsp-*`` arguments): ``n``, the
    requests the scenario sends, is groups x prompts per group, and where the line has
    details its successful requests asked the default output length and their prompts sit
    within :data:`GSP_INPUT_SLACK` of system + question tokens. Else None (the lengths then
    come from the details or the means, without shared prefixes, as said in the notes)."""
    if run.args.get("dataset_name") != GSP_DATASET or multi_turn_replay(run):
        return None
    g = GSP_DEFAULTS
    if n != g["num_groups"] * g["prompts_per_group"]:
        return None
    d = run.details
    if d is not None:
        ok = d.ok
        prompt = g["system_prompt_len"] + g["question_len"]
        if (not ok.any() or (d.output_lens[ok] != g["output_len"]).any()
                or abs(float(np.median(d.input_lens[ok])) / prompt - 1) > GSP_INPUT_SLACK):
            return None
    sp = {k: g[k] for k in ("num_groups", "prompts_per_group", "system_prompt_len", "question_len", "range_ratio")}
    note = (f"prompts: generated-shared-prefix at SGLang's defaults (the line's {n} requests = "
            f"{g['num_groups']} groups x {g['prompts_per_group']}; the line writes no --gsp-* argument): "
            f"{g['system_prompt_len']}-token system prompts shared by each group, {g['question_len']}-token "
            f"questions, {g['output_len']} output tokens, range ratio {g['range_ratio']:g}; other --gsp-* values: "
            "edit workload.shared_prefix")
    return sp, {"kind": "fixed", "value": g["output_len"]}, note


def _mean_lengths(run: BenchRun) -> tuple[int, int] | None:
    """(input, output) tokens per completed request, rounded (at least 1), from the line's
    totals, or None when it lacks them. vLLM's result files never write their length
    arguments (vllm 0.8.5 ``benchmark_serving.py`` ``main()``, 0.33 ``vllm/benchmarks/serve.py``),
    and ``vllm bench serve``'s default random dataset (range ratio 0.0: [len x (1 - r),
    len x (1 + r)]) sends fixed lengths, which these means then are exactly."""
    s = run.summary
    n, tin, tout = s.get("completed"), s.get("total_input_tokens"), s.get("total_output_tokens")
    if not n or n < 1 or tin is None or tout is None:
        return None
    return max(1, round(tin / n)), max(1, round(tout / n))


def replay_refusal(run: BenchRun) -> ConfigError | None:
    """Why ``run`` cannot be rebuilt at its rate from its line (the line names a replay whose
    trace or conversations bench_serving does not write into it), or None: SGLang's
    ``request_rate: "trace"`` (``--use-trace-timestamps``), a ``mooncake`` replay
    (:data:`MOONCAKE_DATASET`: :func:`scenario_from_bench` rebuilds it from the trace file given
    with ``--dataset-path``, :func:`_mooncake_workload`; a fit of a sweep file leaves it out) and
    a multi-turn replay other than ``agentic-trace``
    (:func:`sim.bench_serving.multi_turn_replay`). A line with its send times replays them
    instead (:func:`_trace_workload`)."""
    a = run.args
    if a.get("dataset_name") == MOONCAKE_DATASET:   # its rate (a number, inf or "trace") is ignored
        return ConfigError(run.source, "dataset_name", MOONCAKE_DATASET,
                           "SGLang replays a mooncake trace at its timestamps x --mooncake-slowdown-factor whatever "
                           "request_rate says, each trace row's --mooncake-num-rounds rounds at once, with prompts built "
                           "from hash_ids; the line holds neither the trace nor its send times: build its scenario with "
                           "`specsched scenario from-bench FILE:LINE --dataset-path TRACE.jsonl` and compare with "
                           "validate --measured FILE:LINE --scenario S")
    if a.get("request_rate") == "trace" and (run.details is None or run.details.start_s is None):
        return ConfigError(run.source, "request_rate", "trace", "a trace replay cannot be rebuilt from its result "
                           "line (it holds neither the trace nor its send times); write a 'trace' workload for the "
                           "trace file and compare with validate --measured FILE:LINE --scenario S")
    if multi_turn_replay(run) and a.get("dataset_name") != AGENTIC_DATASET:
        return ConfigError(run.source, "total_input_tokens", 0,
                           f"a multi-turn replay (dataset {a.get('dataset_name', '<missing>')!r}: its requests are the "
                           "turns of conversations, each sent after the reply before; SGLang writes 0 input tokens for "
                           "it and not the turn count, e.g. --gsp-num-turns): write a 'multi_turn' workload and compare "
                           "with validate --measured FILE:LINE --scenario S")
    return None


def _workload(run: BenchRun, burstiness: float | None) -> tuple[dict[str, Any], list[str]]:
    a = run.args
    rate = a.get("request_rate")
    refusal = replay_refusal(run)
    if refusal is not None:
        raise refusal
    if run.extra.get("ramp_up_strategy") is not None:   # vllm bench serve --ramp-up-strategy
        raise ConfigError(run.source, "ramp_up_strategy", run.extra["ramp_up_strategy"],
                          "the request rate ramped during the run; a scenario has one rate (not modelled)")
    n = run.num_prompts
    if not n:
        if run.summary.get("completed") == 0 and "num_prompts" not in a:   # there, but nothing finished
            raise ConfigError(run.source, "completed", 0, "the run finished no request and the line has no num_prompts: "
                              "the request count is unknown")
        raise ConfigError(run.source, "num_prompts", "<missing>", "need num_prompts, the per-request details or completed "
                          "(SGLang 0.1.24-0.2.11 write none of them: compare with validate --measured FILE:LINE --scenario S)")
    notes = []
    if "num_prompts" not in a:
        notes.append(f"num_requests {n}: {'the details count' if run.details is not None else 'completed (SGLang writes no num_prompts)'}")
    if rate is None:
        rate = math.inf
        notes.append("request_rate absent: bench_serving's default inf assumed")
    sent, n = n, successes(run)
    if n < sent:
        if n == 0:
            raise ConfigError(run.source, "completed", 0, f"every one of the line's {sent} requests failed: "
                              "no request to send")
        notes.append(failed_note(sent, n, rate))
        if math.isfinite(rate):
            rate = rate * n / sent   # the successes of a Poisson stream: a Poisson stream at their share
    conc = a.get("max_concurrency")
    if burstiness is None and a.get("burstiness") not in (None, 1.0):
        if math.isinf(rate):
            # vLLM writes its --burstiness whatever the rate, and at rate inf get_request yields
            # every request without a gap (benchmarks/benchmark_serving.py 0.6.6-0.10 and
            # vllm/benchmarks/serve.py: "If the request rate is infinity, then we don't need
            # to wait"): the shape shaped nothing. Only the command line's is refused below
            notes.append(f"arrivals: the line's burstiness {a['burstiness']:g} has no effect at request_rate inf "
                         "(vLLM sends every request at once whatever its --burstiness)")
        else:
            burstiness = a["burstiness"]
    if math.isinf(rate):
        if burstiness is not None:
            raise ConfigError("<command line>", "--burstiness", burstiness, "needs a finite request_rate")
        if conc:
            return {"kind": "closed_loop", "num_requests": n, "concurrency": conc}, notes
        return {"kind": "burst", "num_requests": n}, notes
    w: dict[str, Any] = {"kind": "poisson", "num_requests": n, "request_rate": rate}
    if conc:
        w["max_concurrency"] = conc
    if burstiness is not None and burstiness != 1.0:
        w["burstiness"] = burstiness
    if "endpoint_type" in run.extra and "best_of" not in run.extra:
        # vllm bench serve without best_of: 0.9.2 on; 0.10.0+ rescale the sends (checked: 0.9.2 does not)
        w["normalize_arrivals"] = True
        notes.append("arrivals: rescaled so the last send falls at num_prompts / rate, as vllm bench serve does from "
                     "0.10.0 (the file does not name its version: for 0.9.x set workload.normalize_arrivals: false)")
    return w, notes


def successes(run: BenchRun) -> int:
    """The requests of ``run`` a scenario built from it sends: the ones that succeeded
    (``completed``) when the line says how many were sent (``num_prompts``, the details'
    count) and more were (failed requests), else every one sent.

    bench_serving counts only successful requests in ``completed``, the token totals and
    the throughputs, each throughput over the whole run's duration (0.5.23
    benchmark/serving.py ``calculate_metrics``: a failed request adds 0 output tokens and no
    input tokens; ``request_throughput = completed / dur_s``); a scenario that also sent
    the failed ones predicted ``completed`` and the throughputs high by the failed share."""
    n = run.num_prompts or 0
    c = run.summary.get("completed")
    return int(c) if c is not None and 0 <= c < n else n


def failed_note(sent: int, ok: int, rate: float) -> str:
    """The assumption a scenario built from a line with failed requests states (from-bench,
    validate-bench)."""
    thinned = (f", at {rate * ok / sent:.4g} req/s (the line's {rate:g} x {ok}/{sent}, so that they arrive over "
               "the same span)" if math.isfinite(rate) else "")
    return (f"requests: {sent - ok} of the line's {sent} requests failed; the scenario sends the {ok} that "
            f"succeeded{thinned}: bench_serving counts only successful requests in completed, the token totals "
            "and the throughputs (over the whole run's duration). The failed ones are taken to have cost the "
            "server nothing (refused at once: a prompt past the context length, a full queue); ones that ran "
            "before failing (a timeout) were load the prediction lacks")


AGENTIC_DATASET = "agentic-trace"

TRACE_OPTIONS = {"dataset_path": "--dataset-path", "num_conversations": "--num-prompts",
                 "dataset_offset": "--dataset-offset", "agentic_max_turns": "--agentic-max-turns",
                 "mooncake_num_rounds": "--mooncake-num-rounds",
                 "mooncake_slowdown_factor": "--mooncake-slowdown-factor"}
"""The command-line options of a replayed trace (:func:`scenario_from_bench`'s keywords -> the
option), which bench_serving does not write into its line."""


def trace_option_datasets(keyword: str) -> tuple[str, ...]:
    """The ``dataset_name`` values whose lines take :data:`TRACE_OPTIONS` ``keyword``: the
    trace path and ``--num-prompts`` both replays, ``--dataset-offset`` and
    ``--agentic-max-turns`` an ``agentic-trace`` line, the ``--mooncake-*`` a ``mooncake`` one."""
    if keyword.startswith("mooncake_"):
        return (MOONCAKE_DATASET,)
    if keyword in ("dataset_offset", "agentic_max_turns"):
        return (AGENTIC_DATASET,)
    return (AGENTIC_DATASET, MOONCAKE_DATASET)


def trace_options_for(run: BenchRun, options: dict[str, Any]) -> dict[str, Any]:
    """Of ``options`` (:data:`TRACE_OPTIONS` keywords, None where not given), those ``run``'s
    dataset takes (:func:`trace_option_datasets`). ``calibrate --from`` gives every line of a
    sweep file the same options: a ``mooncake`` line's ``--dataset-path`` refused the file's
    random-rate lines beside it."""
    name = run.args.get("dataset_name")
    return {k: v for k, v in options.items() if v is None or name in trace_option_datasets(k)}


def _agentic_workload(run: BenchRun, path: str | None, offset: int | None, max_turns: int | None,
                      conversations: int | None) -> tuple[dict[str, Any], list[str]]:
    """A ``multi_turn`` workload replaying the agentic trace a bench_serving ``agentic-trace``
    line ran (module docstring). ``path``/``offset``/``max_turns``/``conversations`` are the
    command line's; each falls back to the line's own key (``dataset_path``,
    ``dataset_offset``, ``agentic_max_turns``: specsched's lines write them) and then to
    bench_serving's default (offset 0, every turn, the count that matches the line).

    Raises:
        ConfigError: no trace path; a trace or finite-rate run; a bad trace file; no count
            of conversations that sends the line's requests.
    """
    from specsched.sim.agentic_trace import load_agentic_trace
    from specsched.sim.workload_config import AGENTIC_REPLY_LEN

    a, x = run.args, run.extra
    path = path or x.get("dataset_path")
    if not path:
        raise ConfigError(run.source, "dataset_name", AGENTIC_DATASET, "the conversations are in the trace file, "
                          "which bench_serving does not write into the line: give it with --dataset-path TRACE.json")
    offset = offset if offset is not None else x.get("dataset_offset", 0)
    max_turns = max_turns if max_turns is not None else x.get("agentic_max_turns")
    for key, v, lo in (("dataset_offset", offset, None), ("agentic_max_turns", max_turns, 1)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or (lo is not None and v < lo)):
            raise ConfigError(run.source, key, v, "must be an integer" + (f" >= {lo}" if lo else ""))
    rate = a.get("request_rate", math.inf)
    if rate == "trace":
        raise ConfigError(run.source, "request_rate", rate, "an agentic-trace run starts its conversations at a rate "
                          "(a number, or inf), not at trace timestamps")
    notes = []
    tr = load_agentic_trace(path, max_turns=max_turns, offset=offset, limit=conversations, key="--dataset-path")
    if conversations is None:
        rounds = run.num_prompts
        cum = np.cumsum(tr.num_turns)
        hit = np.flatnonzero(cum == rounds) if rounds else np.array([], dtype=np.int64)
        if not len(hit):
            raise ConfigError(run.source, "completed" if run.details is None else "input_lens", rounds,
                              f"no number of the trace's conversations sends exactly this many requests ({len(tr)} "
                              f"conversations, offset {offset}, max_turns {max_turns}, {int(cum[-1])} turns in all): "
                              "give --num-prompts N (conversations), --dataset-offset or --agentic-max-turns as the run had them")
        conversations = int(hit[0]) + 1
        notes.append(f"conversations: {conversations}, the count whose turns add up to the line's {rounds} requests "
                     "(bench_serving writes no --num-prompts)")
        tr = load_agentic_trace(path, max_turns=max_turns, offset=offset, limit=conversations, key="--dataset-path")
    elif run.num_prompts and int(tr.num_turns.sum()) != run.num_prompts:
        notes.append(f"requests: the {len(tr)} conversations send {int(tr.num_turns.sum())} turns, the line "
                     f"{run.num_prompts} requests (another offset, turn cap or conversation count, or failed requests?)")
    conc = a.get("max_concurrency") or (len(tr) if math.isinf(rate) else None)
    if not a.get("max_concurrency"):
        notes.append(f"max_concurrency absent: all {len(tr)} conversations in flight at once (request rate inf)"
                     if math.isinf(rate) else "max_concurrency absent: no cap on the conversations in flight")
    out_len = a.get("sharegpt_output_len") or AGENTIC_REPLY_LEN
    if not a.get("sharegpt_output_len"):
        notes.append(f"output: {AGENTIC_REPLY_LEN} tokens a turn (sharegpt_output_len null: agentic_trace.py "
                     "DEFAULT_AGENTIC_OUTPUT_LEN)")
    turns = tr.num_turns
    notes.append(f"agentic trace {Path(path).name}: {len(tr)} conversations (offset {offset}, max_turns {max_turns}), "
                 f"turns min {int(turns.min())} max {int(turns.max())} mean {turns.mean():.1f}; later turns' new tokens = "
                 f"prompt_tokens growth - {AGENTIC_REPLY_LEN} (the trace run's reply, assumed: workload.multi_turn."
                 "agentic_trace.trace_reply_len)")
    sys_len, reply_len = x.get("agentic_system_prompt_len"), x.get("agentic_trace_reply_len")
    for key, v in (("agentic_system_prompt_len", sys_len), ("agentic_trace_reply_len", reply_len)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise ConfigError(run.source, key, v, "must be an integer >= 0 (tokens)")
    if sys_len:
        notes.append(f"prefix: {sys_len} system-prompt tokens shared by every conversation, as the line's run "
                     "assumed (agentic_system_prompt_len)")
    elif tr.shared_system_note():
        notes.append(f"prefix: {tr.shared_system_note()}")
    at: dict[str, Any] = {"path": str(Path(path).resolve()) if Path(path).is_file() else str(path)}
    if offset:
        at["offset"] = offset
    if max_turns is not None:
        at["max_turns"] = max_turns
    if reply_len is not None:
        at["trace_reply_len"] = reply_len
    w: dict[str, Any] = {"kind": "multi_turn"}
    if conc:
        w["concurrency"] = int(conc)
    if not math.isinf(rate):
        w["request_rate"] = rate
        notes.append(f"arrivals: conversations started at {rate:g}/s, exponential gaps (bench_serving get_request over "
                     "the multi-turn rows); each sends its turns back to back")
    w.update(output_len={"kind": "fixed", "value": int(out_len)},
             multi_turn={"num_conversations": conversations, "agentic_trace": at,
                         **({"system_prompt_len": sys_len} if sys_len else {})})
    return w, notes


MOONCAKE_OUTPUT_LEN = 256
"""The output length bench_serving asks of a Mooncake row without ``output_length`` (SGLang
0.5.23 benchmark/datasets/mooncake.py ``get_mooncake_request_over_time``)."""


def _mooncake_workload(run: BenchRun, path: str | None, rounds: int | None, slowdown: float | None,
                       sessions: int | None) -> tuple[dict[str, Any], list[str], pd.DataFrame]:
    """The requests a bench_serving ``mooncake`` line sent, rebuilt from the Mooncake trace it
    read (``--dataset-path``; the line names no file) as a ``trace`` workload.

    SGLang 0.5.23 (``benchmark/datasets/mooncake.py``): ``MooncakeDataset.load`` keeps the
    first ``--num-prompts`` rows of the file; ``get_mooncake_request_over_time`` sorts them by
    ``timestamp`` and sends row i at (timestamp_i - timestamp_0) / 1000 x
    ``--mooncake-slowdown-factor`` s (``--request-rate`` ignored, for backend ``sglang``:
    ``benchmark/serving.py`` ``benchmark()``), its ``--mooncake-num-rounds`` rounds together,
    each asking the row's ``output_length`` (256 when absent). Round r's prompt is the chat
    of r user turns, each the row's query (per ``hash_ids`` entry ``"{id}"`` + 128 x ``"hi"``),
    with r - 1 placeholder replies of ``output_length`` words between them; ``input_length``
    is not used. So here:

    - arrivals: the trace's, x the slowdown factor (default 1.0, bench_serving's), R rounds
      (default 1) at each row's time; the row count is the line's requests / R (``--num-prompts``
      sets it, and then R = requests / rows);
    - prompt lengths: the line's own ``input_lens`` (the server's counts) with details; else
      r x n_ids x B + (r - 1) x output_length for round r of a row of n_ids ids, B (tokens per
      id) fitted to the line's ``total_input_tokens`` (the chat template's few tokens a turn
      folded into B);
    - shared prefixes: the row's ``hash_ids`` as prompt blocks of B tokens
      (:mod:`sim.trace_prefix`), so rows with equal leading ids share those blocks in the
      radix cache, and round r > 1 shares round 1's query (its placeholder replies and later
      turns are its own).

    Returns (workload, notes, trace table).

    Raises:
        ConfigError: no trace path, or not a file; a bad trace row (:func:`sim.trace.load_trace`);
            a request count that is no whole number of rows of R rounds; fewer rows in the file
            than the line's sessions; an option out of range.
    """
    from specsched.sim.input_files import is_input_file
    from specsched.sim.trace import load_trace
    from specsched.sim.workload_config import TraceConfig

    a = run.args
    path = path or run.extra.get("dataset_path")
    if not path:
        raise ConfigError(run.source, "dataset_name", MOONCAKE_DATASET, "the requests are the rows of the Mooncake trace "
                          "bench_serving read, which it does not write into the line: give the file with --dataset-path "
                          "TRACE.jsonl (bench_serving's own --dataset-path, or the /tmp/<mooncake-workload>_trace.jsonl it "
                          "downloaded)")
    if not is_input_file(Path(path)):
        raise ConfigError("<command line>", "--dataset-path", path, "no such trace file (the Mooncake trace the run read)")
    if slowdown is not None and not (isinstance(slowdown, (int, float)) and math.isfinite(slowdown) and slowdown > 0):
        raise ConfigError("<command line>", "--mooncake-slowdown-factor", slowdown, "must be a number > 0")
    n = run.num_prompts
    if not n:
        raise ConfigError(run.source, "completed", run.summary.get("completed"), "the line sent no request to rebuild")
    notes = []
    if sessions is not None and rounds is None:
        if n % sessions:
            raise ConfigError("<command line>", "--num-prompts", sessions, f"the line's {n} requests are no whole number "
                              "of rounds of this many trace rows: give --mooncake-num-rounds as the run had it")
        rounds = n // sessions
    rounds = rounds or 1
    if n % rounds:
        raise ConfigError("<command line>", "--mooncake-num-rounds", rounds, f"the line's {n} requests are no whole "
                          "number of sessions of this many rounds: give the run's --mooncake-num-rounds")
    sessions = sessions or n // rounds
    if sessions * rounds != n:
        notes.append(f"requests: {sessions} rows x {rounds} rounds = {sessions * rounds}, the line {n} requests "
                     "(failed requests, or another --num-prompts?)")
    factor = float(slowdown) if slowdown is not None else 1.0
    # the whole file by time, then the file's first `sessions` rows of it: bench_serving keeps
    # the first rows as written and sorts those (the first N by time of a file written out of
    # order are other rows)
    tr = load_trace(TraceConfig(path=str(path), layout="mooncake", sort=True), output_default=MOONCAKE_OUTPUT_LEN)
    if len(tr) < sessions:
        raise ConfigError("<command line>", "--dataset-path", path, f"{len(tr)} rows; the line's {n} requests need "
                          f"{sessions} rows of {rounds} round(s): another file, or give --mooncake-num-rounds/--num-prompts")
    keep = np.sort(np.argsort(tr.lines, kind="stable")[:sessions])   # in time order
    if tr.hash_ids is None or tr.hash_offsets is None:
        ids = [np.zeros(0, dtype=np.int64)] * len(keep)
    else:
        ids = [tr.hash_ids[tr.hash_offsets[i]:tr.hash_offsets[i + 1]] for i in keep]
    n_ids = np.repeat(np.array([len(x) for x in ids], dtype=float), rounds)
    out = np.repeat(tr.output_len[keep].astype(np.int64), rounds)
    r = np.tile(np.arange(1, rounds + 1, dtype=float), len(keep))
    d = run.details
    if d is not None and len(d.input_lens) == len(r):
        total = float(np.sum(d.input_lens))
        ins = np.asarray(d.input_lens, dtype=np.int64)
        src = "the line's input_lens (each request's prompt as the server counted it)"
    else:
        total = run.summary.get("total_input_tokens")
        completed = run.summary.get("completed")
        if not isinstance(total, (int, float)) or not total or not completed:
            raise ConfigError(run.source, "total_input_tokens", total, "the prompt lengths are known from the details "
                              "(--output-details) or the line's input total; it has neither")
        total *= len(r) / completed   # the total counts the successful requests only
        ins = None
        src = "round r: r x ids x B + (r - 1) x output_length, B fitted to the line's total_input_tokens"
    per_id = (total - float(np.sum((r - 1) * out))) / max(float(np.sum(r * n_ids)), 1.0)
    block = max(1, round(per_id))
    if ins is None:
        ins = np.maximum(1, np.round(r * n_ids * per_id + (r - 1) * out)).astype(np.int64)
    t = np.repeat(tr.arrival_s[keep] - tr.arrival_s[keep[0]], rounds) * factor
    table = pd.DataFrame({"timestamp": t, "input_length": ins, "output_length": out,
                          "hash_ids": [" ".join(map(str, x.tolist())) for x in ids for _ in range(rounds)]})
    notes.append(f"mooncake trace {Path(path).name}: its first {len(keep)} rows sorted by timestamp (bench_serving keeps the file's "
                 f"first --num-prompts rows, then sorts them), sent at their timestamps x {factor:g} "
                 f"(--mooncake-slowdown-factor{'' if slowdown is not None else ', the default: the line does not say'}), "
                 f"{rounds} round(s) each at once (--mooncake-num-rounds{'' if rounds != 1 or sessions != n else ', the default'}); "
                 "request_rate ignored, as bench_serving ignores it")
    notes.append(f"prompts: {src}; hash_ids as shared blocks of {block} tokens (bench_serving's ~130-token text per id, "
                 f"{per_id:.1f} fitted), not the trace's input_length")
    w: dict[str, Any] = {"kind": "trace", "trace": {"path": "<trace>", "layout": "custom", "time_unit": "s",
                                                    "columns": {"hash_ids": "hash_ids"}, "block_size": block}}
    if a.get("max_concurrency"):
        w["max_concurrency"] = a["max_concurrency"]
    return w, notes, table


BURST_SPREAD = 0.1
BURST_SPREAD = 0.1
"""A line that says its requests all arrived at once (``request_rate`` inf: a burst, or a
closed loop with ``max_concurrency``) but whose own arrival times spread over more than
this share of its duration, and over a second or more, did not arrive at once. vllm bench
serve (0.23.0 on, ``vllm/benchmarks/serve.py`` ``main_async``) runs ``--dataset-name
timed_trace`` self-timed (its default there): ``get_request`` sleeps to each request's
timestamp in the trace, while ``result_json["request_rate"]`` stays ``"inf"`` (the default
rate, unused). At rate inf ``get_request`` yields without sleeping, so every request task is
created (its ``request_arrival_time`` taken) before the first one runs. An arrival is the
send time (``start_times``, 0.16 on with ``--save-detailed``) less the wait for a
concurrency slot (``queue_times``, 0.30 on); with ``max_concurrency`` and no
``queue_times`` the arrivals are unknown and the line is taken as it says. Only a line that
does not name its dataset (vLLM's result files never do) is judged so: one that names it
says how it sent (SGLang's ``"trace"`` rate; a multi-turn run's turns follow their replies)."""


def _sent_over_time(run: BenchRun) -> str:
    """The note saying why a line's own send times replace its "all at once" rate, or ""."""
    d = run.details
    if run.args.get("request_rate") == "trace" and d is not None and d.start_s is not None:
        # a trace replay written with its send times (specsched's own run or measure of a trace
        # workload): the only rate it had is the one they hold (SGLang's trace lines have none)
        return "arrivals: the line is a trace replay (request_rate 'trace') with its send times: they are replayed"
    rate, dur = run.args.get("request_rate"), run.summary.get("duration")
    if (d is None or d.start_s is None or not isinstance(rate, float) or not math.isinf(rate) or not dur
            or "dataset_name" in run.args):   # a line naming its dataset says how it sent (a multi-turn run's
        return ""                             # turns follow their replies); vLLM's never name theirs
    arrived = d.start_s.copy()
    queued = run.extra.get("queue_times")
    if isinstance(queued, list) and len(queued) == len(arrived) and all(
            isinstance(q, (int, float)) and not isinstance(q, bool) for q in queued):
        arrived = arrived - np.asarray(queued, dtype=float)
    elif run.args.get("max_concurrency"):
        return ""
    arrived = arrived[np.isfinite(arrived)]
    spread = float(arrived.max() - arrived.min()) if arrived.size else 0.0
    if spread < 1.0 or spread < BURST_SPREAD * dur:
        return ""
    return (f"arrivals: the line says request_rate inf (all at once), but its requests arrived over {spread:.3g} s "
            f"of its {dur:.3g} s run (vllm bench serve --dataset-name timed_trace sends at the trace's timestamps and "
            "writes inf): its own arrivals are replayed")


def _trace_workload(run: BenchRun) -> tuple[dict[str, Any], list[str], pd.DataFrame]:
    """The run's own arrivals as a ``trace`` workload: vLLM's ``start_times`` (the client's
    clock at each send, ``vllm bench serve --save-detailed``, 0.33 ``benchmark()``) less its
    ``queue_times`` (the wait for a ``--max-concurrency`` slot) give each request's arrival;
    the successful requests' lengths come with them. Returns (workload, notes, trace table)."""
    d = run.details
    if d is None or d.start_s is None:
        raise ConfigError(run.source, "start_times", "<missing>",
                          "--arrivals details needs the send times that vllm bench serve --save-detailed writes "
                          "(SGLang's bench_serving writes none)")
    sent = d.start_s.copy()
    queued = run.extra.get("queue_times")
    notes = []
    if isinstance(queued, list) and len(queued) == len(sent) and all(isinstance(q, (int, float)) for q in queued):
        sent = sent - np.asarray(queued, dtype=float)   # arrival = send - wait for a concurrency slot
        notes.append("arrivals: start_times - queue_times of the line (vLLM's send times less the slot wait)")
    else:
        notes.append("arrivals: start_times of the line (no queue_times: send times taken as arrivals)")
    ok = d.ok & np.isfinite(sent)
    order = np.argsort(sent[ok], kind="stable")
    t = sent[ok][order]
    # full precision: a send time rounded to the microsecond can move a request across a
    # scheduling pass and change its TTFT by a whole step (a replay then differs from the run)
    table = pd.DataFrame({"timestamp": t - t[0] if len(t) else t,
                          "input_length": d.input_lens[ok][order].clip(min=1),
                          "output_length": d.output_lens[ok][order]})
    if table.empty:
        raise ConfigError(run.source, "errors", "every request failed", "no successful request to replay")
    notes.append(f"workload: a trace of the run's {len(table)} successful requests (lengths as measured)")
    w: dict[str, Any] = {"kind": "trace", "trace": {"path": "<trace>", "layout": "custom", "time_unit": "s"}}
    if run.args.get("max_concurrency"):
        w["max_concurrency"] = run.args["max_concurrency"]
    return w, notes, table


def _template_server_notes(run: BenchRun, server: ServerArgs, name: str) -> list[str]:
    """The server arguments the line's server_info states (:func:`line_server_args`) that
    ``--template``'s server replaces: each one it states otherwise, and those it leaves to the
    profile's or specsched's defaults. The template's server was taken without a word, so a
    line measured at 8192-token chunks and a 48-request graph limit was predicted at the
    template's (or the defaults') whatever the server had run."""
    line = line_server_args(run)
    if not line:
        return []
    stated = server.model_dump(mode="json", exclude_unset=True)
    other, unstated = [], []
    for k, v in line.items():
        v = getattr(v, "value", v)
        if k not in stated:
            default = ServerArgs.model_fields[k].default if k in ServerArgs.model_fields else None
            if not same_setting(default, v):   # one at specsched's own default is no news
                unstated.append(f"{k} {clipped(repr(v), 40)}")
        elif not same_setting(stated[k], v):
            other.append(f"{k} {clipped(repr(v), 40)} (template {clipped(repr(stated[k]), 40)})")
    out = []
    if other:
        out.append(f"server: the line's server_info ran {', '.join(other)}: the template {name}'s values are used")
    if unstated:
        out.append(f"server: the line's server_info states {', '.join(unstated)}, which the template {name} leaves "
                   "to the profile's or specsched's defaults")
    return out


def line_server_args(run: BenchRun) -> dict[str, Any]:
    """The scenario's ``server`` arguments the line's ``server_info`` states, as
    ``scenario from-bench`` writes them (:func:`_server`, its notes dropped); empty without
    server_info. ``validate --measured F:L --scenario S`` compares them with S's server."""
    return _server(run, [])


def _server(run: BenchRun, notes: list[str], state_with: str = "--template") -> dict[str, Any]:
    raw = run.extra.get("server_info")
    info = _line_server_info(run)   # PD disaggregation: the decode server (as bench_serving reads it)
    if isinstance(raw, dict) and info is not raw:
        n_p = len(raw["prefill"]) if isinstance(raw.get("prefill"), list) else "?"
        notes.append(f"server: the run was prefill-decode disaggregated ({n_p} prefill and {len(raw['decode'])} "
                     "decode servers in server_info): the scenario is one colocated server with the decode "
                     "server's arguments; state the layout under server.disaggregation (docs/disaggregation.md)")
    if isinstance(info, dict) and info.get("disaggregation_mode") not in (None, "null"):
        # a role is the layout's (server.disaggregation), not a colocated scenario's
        if not notes or "disaggregated" not in notes[-1]:
            notes.append(f"server_info disaggregation_mode = {info['disaggregation_mode']!r} left out: the scenario "
                         "is one colocated server; state a layout under server.disaggregation (docs/disaggregation.md)")
        info = {k: v for k, v in info.items() if k != "disaggregation_mode"}
    if not isinstance(info, dict):
        notes.append(f"server: the line has no server_info; specsched's defaults (state them with {state_with})")
        return {}
    info = _server_level_dp(info, notes)
    info = _effective_running(info, notes)
    scheduler_pool = info.get("max_total_num_tokens") is not None
    info = _launch_pool_cap(info, notes)
    info = _graph_args(info, notes)
    out: dict[str, Any] = {}
    for k in ServerArgs.model_fields:
        v = info.get(k)
        if v is None:
            continue
        if k == "speculative_algorithm":
            v = str(v).lower()
            if v not in SpecAlgorithm.__members__:
                notes.append(f"server_info speculative_algorithm {v!r} has no modelled drafter here: left out")
                continue
        out[k] = v
    lb = out.get("load_balance_method")
    if lb is not None and (_int_or_1(out.get("dp_size")) <= 1 or out.get("enable_dp_attention")
                           or lb in ("auto", resolve_method("auto", str(info.get("disaggregation_mode") or "null")))):
        # kept where it changes the run: a method of the line's data-parallel replicas other
        # than what auto resolves to (sim/dp_dispatch.py); DP attention's ranks run auto's only
        # (a load-aware method there: the line's value is named, not run)
        if out.get("enable_dp_attention") and _int_or_1(out.get("dp_size")) > 1 and lb not in (
                "auto", resolve_method("auto", str(info.get("disaggregation_mode") or "null"))):
            notes.append(f"{SETUP_MISMATCH}the line's server sent requests to its DP attention ranks by "
                         f"load_balance_method {lb!r}; the scenario sends them by what auto resolves to, the only "
                         "method the model runs under DP attention: TTFT under uneven load may differ")
        del out["load_balance_method"]
    while out:   # drop what the model cannot use, one key at a time, saying which
        try:
            ServerArgs.model_validate(out)
            break
        except ValidationError as e:
            loc = e.errors()[0]["loc"]
            # a check across fields (a model validator) has no location: its FieldError names
            # the key (server.dp_size); before, the first key was dropped, then the next, ...
            # until the refusal stopped, so the scenario lost every server argument before it
            cause = (e.errors()[0].get("ctx") or {}).get("error")
            named = cause.key.split(".", 1)[1] if isinstance(cause, FieldError) and cause.key.startswith("server.") else None
            bad = (str(loc[0]) if loc else named if named in out
                   else "speculative_algorithm" if "speculative_algorithm" in out else next(iter(out)))
            notes.append(f"server_info {bad} = {out.pop(bad)!r} not usable by the model: left out ({e.errors()[0]['msg']})")
    if out:
        # a value the model resets as SGLang does (a chain window with topk 1 is num_steps + 1,
        # _handle_eagle_family) is written as it runs: server_info's own could be anything
        args = ServerArgs.model_validate(out)
        for k in CHAIN_PARAM_KEYS:
            if k in out and out[k] != getattr(args, k):
                notes.append(f"server_info {k} = {clipped(out[k])!r}: {getattr(args, k)}, as SGLang runs it "
                             "(0.5.23 arg_groups/speculative_hook.py _handle_eagle_family: topk 1 verifies "
                             "num_steps + 1 tokens)")
                out[k] = getattr(args, k)
    algo = SpecAlgorithm(out.get("speculative_algorithm", "none"))
    if algo.enabled and not algo.is_block and not any(k in out for k in CHAIN_PARAM_KEYS):
        # a real server_info carries the resolved steps/topk/draft tokens; without them the
        # line's accept length (below) decides the drafter and its window, or there is none
        notes.append(f"server_info speculative_algorithm {out.pop('speculative_algorithm')!r} comes without its "
                     "steps, topk or draft tokens: left out here (the line's accept length, if any, decides below)")
    if scheduler_pool and "max_total_num_tokens" in out and out.get("mem_fraction_static") is not None:
        # the pool the scheduler sized is the measured one: stated beside the fraction, the
        # simulator reads the pool as --max-total-tokens (an upper bound) and takes the smaller
        # of it and the pool the profile's memory estimate leaves at that fraction (sim/defaults.py),
        # so a real 0.5.23 server_info was predicted with a smaller pool than the server ran
        notes.append(f"server: max_total_num_tokens {out['max_total_num_tokens']} (the pool the server sized) "
                     f"stated without mem_fraction_static {out.pop('mem_fraction_static')!r}: with both the pool is "
                     "read as an upper bound and cut to the profile's estimate at that fraction")
    if info.get("disable_overlap_schedule") is not None:
        out["enable_overlap_schedule"] = not info["disable_overlap_schedule"]
    mfs = info.get("min_free_slots_delay")
    if isinstance(mfs, int) and not isinstance(mfs, bool) and mfs >= 1:
        # SGLang 0.5.23 --min-free-slots-delay: an explicit threshold wins over the automatic one,
        # whatever the drafter (managers/min_free_slots_delayer.py resolve_min_free_slots; its
        # should_delay is the legacy rule)
        out["min_free_slots"] = mfs
        out["admission_delay"] = AdmissionDelay.min_free_slots.value
    notes.append(f"server: {len(out)} arguments from the line's server_info")
    said = {k: u for k, u in UNMODELLED.items() if u.measured is not None}
    for key, u in said.items():
        v = info.get(key)
        if v is not None and v != u.default and isinstance(v, bool) == isinstance(u.default, bool):
            notes.append(f"server_info {key} {v!r} (SGLang's default {u.default!r}; not modelled): {u.measured.format(v=v)}")
    own = ("disable_overlap_schedule", "min_free_slots_delay", "specsched", "attn_dp_size", "max_total_tokens",
           *said, *GRAPH_KEYS,
           *SERVER_INFO_STATE)   # read above; specsched's own provenance (sim/bench_serving.py)
    unused = sorted(k for k, v in info.items() if v is not None and k not in ServerArgs.model_fields and k not in own)
    # the ones that cannot change the prediction (logging, metrics, ports: sim/sglang_launch_args.py)
    # are counted, not listed: a real server_info has dozens, which buried the ones that may matter
    inert = [k for k in unused if is_inert(k)]
    unused = [k for k in unused if not is_inert(k)]
    # the ones switched off, empty or left to SGLang's choice (false, 0, "", [], {}, "auto",
    # "none", ...: :data:`OFF_VALUES`) are counted, not listed: a real 0.5.23 /server_info
    # (ServerArgs.resolved_dict: every field) has some 300, which buried the few set ones (an
    # enabled feature, a chosen backend) that may change timing
    off = [k for k in unused if not info[k] or isinstance(info[k], str) and info[k].strip().lower() in OFF_VALUES]
    set_ = [k for k in unused if k not in off]
    if set_:
        shown = ", ".join(f"{k}={clipped(repr(info[k]), 40)}" for k in set_)
        notes.append(f"server_info keys the model has no argument for (left out): {shown}"
                     + (f"; and {len(off)} more switched off, empty or auto: {', '.join(off[:3])}"
                        f"{', ...' if len(off) > 3 else ''}" if off else ""))
    elif off:
        notes.append(f"server_info keys the model has no argument for (left out), each switched off, empty or "
                     f"auto: {', '.join(off)}")
    if inert:
        notes.append(f"server_info: {len(inert)} SGLang launch arguments with no effect on the prediction left out "
                     f"(logging, metrics, ports, seeds, timeouts, ...: {', '.join(inert[:3])}{', ...' if len(inert) > 3 else ''})")
    return out


SERVER_INFO_STATE = (*SERVER_STATE, "model_path", "tokenizer_path", "served_model_name")
"""/server_info keys that are no launch argument the model could lack: the server's state and
identity (:data:`sim.sglang_launch_args.SERVER_STATE`), and the model and tokenizer paths,
read for the setup notes (:func:`_setup_notes`)."""
OFF_VALUES = frozenset({"", "auto", "none", "null", "off", "default", "disabled"})
"""server_info string values that switch a feature off or leave it to SGLang's own choice
(0.5.23 ``srt/arg_groups/fields``: ``disaggregation_mode`` "null", ``moe_a2a_backend`` "none",
``*_backend`` "auto", ``weight_cache_mode`` "off", ...), counted with the false, 0 and empty ones
among the keys the model has no argument for rather than listed."""


GRAPH_KEYS = ("cuda_graph_config", "cuda_graph_max_bs_decode", "cuda_graph_bs_decode", "cuda_graph_backend_decode",
              "cuda_graph_backend_prefill", "disable_cuda_graph", "enable_piecewise_cuda_graph",
              "disable_piecewise_cuda_graph", "piecewise_cuda_graph_max_tokens")
"""/server_info's CUDA-graph keys as each SGLang version names them, read by :func:`_graph_args`
(0.5.14 on, the flat ``cuda_graph_backend_*`` / ``*_decode`` flags through the
``cuda_graph_config`` they are folded into)."""


def _graph_args(info: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """/server_info's CUDA-graph settings under the scenario's names (``cuda_graph_max_bs``,
    ``cuda_graph_bs``, ``disable_decode_cuda_graph`` and their prefill twins), as each version
    reports them; a name the line already holds is kept.

    - 0.5.14-0.5.23 (``ServerArgs`` ``cuda_graph_config``, resolved by
      ``_parse_cuda_graph_config``; 0.5.20 on in arg_groups/cuda_graph_hook.py): one record per
      phase, ``{"decode": {"backend", "max_bs", "bs", ...}, "prefill": {...}}``, backend
      ``"disabled"`` for an eager phase; the flat ``cuda_graph_max_bs_decode`` /
      ``cuda_graph_bs_decode`` flags, like ``cuda_graph_backend_decode``/``_prefill``, are
      folded into it (and null unless given). These
      versions have no ``cuda_graph_max_bs`` key: the decode graph sizes were dropped (the
      model's defaults ran) and an eager decode or prefill was simulated with graphs.
    - 0.5.5-0.5.13 (``server_args.py`` dataclass fields): ``cuda_graph_max_bs``,
      ``cuda_graph_bs`` as named; ``disable_cuda_graph`` (both phases eager); the prefill
      (piecewise) graph opt-in to 0.5.8 (``enable_piecewise_cuda_graph``, default False: those
      servers ran every extend eagerly, which the model's 0.5.23 default does not) and opt-out
      from 0.5.10 (``disable_piecewise_cuda_graph``, set by ``__post_init__`` where the server
      turns it off), its largest token count ``piecewise_cuda_graph_max_tokens``."""
    said: list[str] = []
    out = dict(info)

    def put(key: str, value: Any, why: str) -> None:
        if value is not None and out.get(key) is None:
            out[key] = value
            said.append(f"{key} {value!r} ({why})")

    cfg = info.get("cuda_graph_config")
    if isinstance(cfg, dict):
        for phase, (off, top, sizes) in (("decode", ("disable_decode_cuda_graph", "cuda_graph_max_bs", "cuda_graph_bs")),
                                         ("prefill", ("disable_prefill_cuda_graph", "cuda_graph_max_bs_prefill",
                                                      "cuda_graph_bs_prefill"))):
            ph = cfg.get(phase)
            if not isinstance(ph, dict):
                continue
            if isinstance(ph.get("backend"), str):
                out[off] = ph["backend"].lower() == "disabled"
                said.append(f"{off} {out[off]} (cuda_graph_config.{phase}.backend {ph['backend']!r})")
            put(top, ph.get("max_bs"), f"cuda_graph_config.{phase}.max_bs")
            put(sizes, ph.get("bs"), f"cuda_graph_config.{phase}.bs")
    else:
        put("cuda_graph_max_bs", info.get("cuda_graph_max_bs_decode"), "cuda_graph_max_bs_decode")
        put("cuda_graph_bs", info.get("cuda_graph_bs_decode"), "cuda_graph_bs_decode")
        if info.get("disable_cuda_graph") is True:
            out["disable_decode_cuda_graph"] = out["disable_prefill_cuda_graph"] = True
            said.append("disable_decode_cuda_graph and disable_prefill_cuda_graph True (disable_cuda_graph)")
        elif isinstance(info.get("enable_piecewise_cuda_graph"), bool) or isinstance(info.get("disable_piecewise_cuda_graph"), bool):
            on = (info["enable_piecewise_cuda_graph"] if isinstance(info.get("enable_piecewise_cuda_graph"), bool)
                  else not info["disable_piecewise_cuda_graph"])
            out["disable_prefill_cuda_graph"] = not on
            said.append(f"disable_prefill_cuda_graph {not on} (the piecewise prefill graph "
                        f"{'on' if on else 'off'} in server_info)")
            if on:
                put("cuda_graph_max_bs_prefill", info.get("piecewise_cuda_graph_max_tokens"),
                    "piecewise_cuda_graph_max_tokens")
    if said:
        notes.append("server: CUDA graphs from server_info: " + "; ".join(said))
    return out


def _server_level_dp(info: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """A DP-attention server's /server_info as the launch arguments the scenario takes.

    SGLang reports its server arguments after its own adjustments: with DP attention over N
    ranks ``chunked_prefill_size`` is already the rank's (divided by N) and
    ``schedule_conservativeness`` already x 0.3 (0.4.x-0.5.x ``ServerArgs.__post_init__``;
    0.5.23 arg_groups/parallel_hook.py ``handle_data_parallelism``, whose resolved values
    ``ServerArgs.resolved_dict`` reports). 0.5.23 also moves the width from ``dp_size`` to
    ``attn_dp_size`` (``handle_deprecated_dp_attention``: ``dp_size`` 1 there). The scenario
    states the server's values and the simulator divides them per rank
    (sim/dp_attention.py ``rank_server_args``), so they are taken back to the server's;
    read as written, an N-rank server was simulated as one rank, or with chunks N times too
    small. specsched's own lines hold the scenario's values and are read as written."""
    if "specsched" in info or not info.get("enable_dp_attention"):
        return info
    n = info.get("attn_dp_size") if isinstance(info.get("attn_dp_size"), int) and info["attn_dp_size"] > 1 \
        else info.get("dp_size")
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        return info
    from specsched.sim.dp_attention import DP_CONSERVATIVENESS

    info = {**info, "dp_size": n}
    said = [f"dp_size {n} (the attention-DP width)"]
    c = info.get("chunked_prefill_size")
    if isinstance(c, int) and not isinstance(c, bool) and c > 0:
        info["chunked_prefill_size"] = c * n
        said.append(f"chunked_prefill_size {c} x {n} = {c * n} (server_info holds the rank's)")
    sc = info.get("schedule_conservativeness")
    if isinstance(sc, (int, float)) and not isinstance(sc, bool) and sc > 0:
        info["schedule_conservativeness"] = round(sc / DP_CONSERVATIVENESS, 12)
        said.append(f"schedule_conservativeness {sc:g} / {DP_CONSERVATIVENESS:g} (server_info holds the DP-scaled value)")
    notes.append("server: DP attention: " + "; ".join(said))
    return info


def _launch_pool_cap(info: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """``--max-total-tokens`` as the scenario's KV pool where /server_info lacks the pool the
    scheduler sized (``max_total_num_tokens``, the scheduler's info that ``build_server_info``
    adds; null or absent in a trimmed or hand-saved server_info). SGLang 0.5.23 caps the
    profiled pool by it (mem_cache/kv_cache_configurator.py ``_apply_token_constraints``:
    min(profiled, max_total_tokens)), which is what a stated ``server.max_total_num_tokens``
    means to the simulator too (sim/defaults.py: cut to the profiled pool where no memory holds
    it). It was listed among the keys the model has no argument for, and the pool left at
    specsched's default. Where the scheduler's pool is there, it is the one the server ran."""
    cap = info.get("max_total_tokens")
    if (info.get("max_total_num_tokens") is not None or not isinstance(cap, int) or isinstance(cap, bool)
            or cap < 1):
        return info
    notes.append(f"server: max_total_num_tokens {cap}: server_info's max_total_tokens (--max-total-tokens, an upper "
                 "bound SGLang takes the smaller of it and the profiled pool); the scheduler's max_total_num_tokens "
                 "is not in it")
    return {**info, "max_total_num_tokens": cap}


def _effective_running(info: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """``max_running_requests`` the server ran with where /server_info leaves it null.

    SGLang 0.5.23 reports the launch's ``max_running_requests``, null when it was not set
    (no speculative decoding, whose hook sets 48), and sizes the limit at start from the KV
    pool (mem_cache/kv_cache_configurator.py ``resolve_max_num_reqs``: min(clamp(pool /
    context_len x 512, 2048, 4096), pool // 2) per DP rank); each DP rank's
    ``internal_states`` entry holds the value it runs with,
    ``effective_max_running_requests_per_dp`` (managers/scheduler_components/
    internal_state.py ``_add_topology``; 0.5.10 already: managers/scheduler.py
    ``get_internal_state``). The scenario states the server's value, which the
    simulator divides per DP-attention rank (sim/dp_attention.py), so it is the rank's x
    ``dp_size``. Without this the scenario kept specsched's 256 where the profile cannot size
    the limit (no hardware block), running a burst 256 at a time. A value the launch set is
    kept, unless the server cut it (min(asked per rank, token capacity // 2), then the mamba
    state cache's cap, ``resolve_max_num_reqs``): then the effective one."""
    if "specsched" in info:
        return info
    states = info.get("internal_states")
    first = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
    eff = first.get("effective_max_running_requests_per_dp")
    if not isinstance(eff, int) or isinstance(eff, bool) or eff < 1:
        return info
    n = info.get("dp_size") if info.get("enable_dp_attention") else 1
    n = n if isinstance(n, int) and not isinstance(n, bool) and n > 1 else 1
    given = info.get("max_running_requests")
    if given is None:
        why = "null in server_info (not set at launch)"
    elif isinstance(given, int) and not isinstance(given, bool) and max(1, given // n) > eff:
        # resolve_max_num_reqs: min(requested per rank, token capacity // 2), then the mamba
        # state cache's cap: the server ran fewer than were asked
        why = f"server_info's {given} cut by the server to its KV pool (resolve_max_num_reqs)"
    else:
        return info
    notes.append(f"server: max_running_requests {eff * n}: {why}; internal_states[0]."
                 f"effective_max_running_requests_per_dp {eff}" + (f" x {n} DP ranks" if n > 1 else "")
                 + ", the limit the server ran with")
    return {**info, "max_running_requests": eff * n}


# SGLang 0.5.23 srt/arg_groups/speculative_hook.py, _auto_choose_speculative_params: the
# EAGLE-family parameters a server gets when its launch names none (most architectures).
ASSUMED_DRAFTER = {"speculative_algorithm": "eagle", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                   "speculative_num_draft_tokens": 4}


def _accept_length(run: BenchRun) -> float | None:
    """The run's mean accept length: the line's ``accept_length`` (SGLang bench_serving takes it
    from /server_info's ``internal_states[0].avg_spec_accept_length`` at the end of the run,
    0.5.23 ``benchmark/serving.py`` ``benchmark()``), else that field of the line's own
    ``server_info`` (its ``decode[0]`` under PD disaggregation, as bench_serving reads it):
    bench_serving writes ``accept_length`` null for a backend without "sglang" in its name
    (``--backend vllm`` against an SGLang server) while it still fetches and writes
    ``server_info``. None (or 0) when the server did not decode speculatively."""
    acc = run.summary.get("accept_length")
    if acc is None:
        info = _line_server_info(run)   # under PD disaggregation the decode server's, as bench_serving reads it
        states = info.get("internal_states") if info is not None else None
        if isinstance(states, list) and states and isinstance(states[0], dict):
            acc = states[0].get("avg_spec_accept_length")
    if isinstance(acc, (int, float)) and math.isfinite(acc) and acc > 0:
        return float(acc)
    return None


def _vllm_drafts(run: BenchRun) -> tuple[int, list[float] | None] | None:
    """What a ``vllm bench serve`` line with a drafter (0.11 on) says about its drafts: the
    draft tokens per draft (vLLM's ``num_speculative_tokens`` k =
    ``spec_decode_draft_tokens / spec_decode_num_drafts``) and, from
    ``spec_decode_per_position_acceptance_rates`` (tokens accepted at position i over drafts:
    the share of drafts that reached it, acceptance being a prefix), the conditional rates
    P(draft i accepted | drafts < i accepted) = rate_i / rate_(i-1) that
    ``acceptance.per_position_rates`` takes. None without the counts (SGLang lines)."""
    x = run.extra
    drafts, tokens = x.get("spec_decode_num_drafts"), x.get("spec_decode_draft_tokens")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
               for v in (drafts, tokens)):
        return None
    k = round(tokens / drafts)
    if k < 1 or k + 1 > MAX_DRAFT_TOKENS or abs(tokens / drafts - k) > 1e-6 * k:
        return None
    rates = x.get("spec_decode_per_position_acceptance_rates")
    cond: list[float] | None = None
    if (isinstance(rates, list) and len(rates) == k
            and all(isinstance(u, (int, float)) and not isinstance(u, bool) and 0 <= u <= 1 for u in rates)):
        cond, prev = [], 1.0
        for u in rates:
            cond.append(min(1.0, u / prev) if prev > 0 else 0.0)
            prev = u
    return k, cond


LINE_KV_BYTES = {"bf16": 2, "bfloat16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}
"""server_info ``kv_cache_dtype`` values whose element size is plain (SGLang 0.5.23
arg_groups/fields/model.py choices; ``auto`` is the model's dtype, resolved per model and GPU,
and the fp4/mxfp8 recipes carry scales): compared with an analytic profile's
``analytic.model.kv_cache_bytes``."""

SETUP_MISMATCH = "setup mismatch: "
"""Prefix of an assumption saying that the line's server is not the one the profile prices
(another TP size, another model) or the scenario predicts (a ``--template`` whose accept
length is not the line's, or whose speculative decoding contradicts the line's:
:func:`speculation_mismatch`): the commands also print it as a ``warning:`` line."""


NO_DRAFTER = frozenset({"none", "null", ""})
"""server_info ``speculative_algorithm`` strings that mean no drafter ran (SGLang 0.5.23
/server_info writes None, ServerArgs' default, as null; a dump through ``str`` writes "None")."""


def line_speculation(run: BenchRun) -> tuple[bool | None, str, Any]:
    """Whether ``run``'s server decoded speculatively, as its line says, with the line's key
    and value that say it: True when its accept length is above 1 (``accept_length``,
    :func:`_accept_length`: SGLang's, its server_info's ``avg_spec_accept_length``, vLLM's
    ``spec_decode_acceptance_length``) or its server_info names a drafter
    (``server_info.speculative_algorithm``, the decode server's under PD); False when its
    server_info states ``speculative_algorithm`` null (or "None": SGLang's default, no
    drafter) and no accept length above 1; None ("", None) when the line does not say. A null
    ``accept_length`` alone does not say: SGLang 0.4.3.post3 on writes null without a
    drafter, but also on a speculative server before its first decode log line since launch
    or /flush_cache (internal_state.py ``_average_accept_length``, :func:`_no_accept_length`),
    and ``--backend vllm`` against SGLang writes null whatever ran."""
    acc = _accept_length(run)
    info = _line_server_info(run)
    stated = info is not None and "speculative_algorithm" in info
    named = info.get("speculative_algorithm") if stated else None
    if acc is not None and acc > 1:
        return True, "accept_length", acc
    if named is not None and str(named).strip().lower() not in NO_DRAFTER:
        return True, "server_info.speculative_algorithm", named
    if stated:   # stated, and no drafter
        return False, "server_info.speculative_algorithm", named
    return None, "", None


def speculation_mismatch(run: BenchRun, server: Any, acceptance: Any, label: str) -> str | None:
    """A :data:`SETUP_MISMATCH` note when ``server`` (a scenario's :class:`ServerArgs`, or a
    template's) contradicts what ``run``'s line says of speculative decoding
    (:func:`line_speculation`): the line's server drafted and ``server`` runs no drafter (the
    prediction decodes one token a step: its TPOT, ITL and throughput are another server's,
    and a fit puts the drafter's speedup into its decode factor), or the line's server ran no
    drafter and ``server`` verifies drafts. ``label`` names the scenario (``the template
    X.yaml``); ``acceptance`` is its acceptance block (a model or a mapping), named in the
    second case. None when they agree or the line does not say."""
    said, key, value = line_speculation(run)
    why = f"{key} {value:.3f}" if key == "accept_length" else f"{key} {value!r}"
    algo = getattr(server, "speculative_algorithm", None)
    spec = bool(getattr(algo, "enabled", False))
    if said is None or said == spec:
        return None
    if said:
        return (f"{SETUP_MISMATCH}speculation: the line's server decoded speculatively ({why}), but {label} runs no "
                "drafter (speculative_algorithm none): the prediction decodes one token a step, so its TPOT, ITL and "
                "throughput are not the measured server's (state its drafter and acceptance there)")
    acc = acceptance.get("mean_accept_length") if isinstance(acceptance, dict) else getattr(acceptance, "mean_accept_length", None)
    at = f" at mean accept length {acc:g}" if isinstance(acc, (int, float)) and not isinstance(acc, bool) else ""
    return (f"{SETUP_MISMATCH}speculation: the line's server ran no drafter ({why}), but {label} runs "
            f"speculative_algorithm {algo.value!r}{at}: the prediction verifies drafts the server never made "
            "(set server.speculative_algorithm none there)")


def _line_server_info(run: BenchRun) -> dict[str, Any] | None:
    """The line's server_info (SGLang /server_info), the decode server's under PD, or None."""
    info = run.extra.get("server_info")
    if isinstance(info, dict) and isinstance(info.get("decode"), list) and info["decode"]:
        info = info["decode"][0]
    return info if isinstance(info, dict) else None


def _model_key(name: str) -> str:
    """A model name reduced for comparison: the last path part, lower case, letters and digits
    only (``meta-llama/Llama-3.1-8B-Instruct`` -> ``llama318binstruct``)."""
    return re.sub(r"[^a-z0-9]", "", name.rstrip("/").rsplit("/", 1)[-1].lower())


def _setup_notes(run: BenchRun, profile: str, notes: list[str]) -> None:
    """Say so, as a :data:`SETUP_MISMATCH` assumption, when the line's server ran another
    tensor-parallel size than the profile prices (server_info ``tp_size``; the profile's
    ``hardware.tp_size``), another KV cache element size (server_info ``kv_cache_dtype``,
    :data:`LINE_KV_BYTES`; an analytic profile's ``kv_cache_bytes``: an fp8 server's pool
    holds twice the tokens of a bf16 profile's), weights it does not price (server_info
    ``quantization``, :func:`_quantization_note`) or another model (server_info ``model_path``, else the line's
    ``model_id``, vLLM's key; against an analytic profile's model name): the scenario predicts
    the profile's setup, not the measured one. The model check is by name (the model's
    name, reduced by :func:`_model_key`, found in the line's), so a local path that hides the
    name is reported too, as something to check, not refused."""
    try:
        prof = load_profile(profile)
    except ConfigError:
        return   # the caller reports a bad profile
    info = _line_server_info(run) or {}
    tp = info.get("tp_size")
    hw = prof.hardware
    # a dp_size without DP attention is replicas, each of tp_size GPUs; with it tp_size counts
    # every GPU of the group the ranks share (the MLP split over all of them), which a profile
    # of another TP size does not price either (docs/dp-attention.md)
    dp_attention = bool(info.get("enable_dp_attention")) or _int_or_1(info.get("attn_dp_size")) > 1
    if hw is not None and isinstance(tp, int) and not isinstance(tp, bool) and hw.tp_size != tp:
        if dp_attention:
            ranks = max(_int_or_1(info.get("dp_size")), _int_or_1(info.get("attn_dp_size")))
            per_rank = (f"; a tp_size 1 profile is read per rank, each rank's forward priced as the whole model on "
                        f"one GPU{'' if analytic_costs(prof) else ' (right only for a profile measured on one rank of such a server)'}"
                        if hw.tp_size == 1 else "")
            notes.append(f"{SETUP_MISMATCH}profile {profile} prices tp_size {hw.tp_size}, but the line's server ran "
                         f"tp_size {tp} with DP attention ({ranks} attention ranks sharing those {tp} GPUs, the MLP "
                         f"split over all of them){per_rank}: the prediction is for the profile's setup (a profile "
                         f"for it: specsched profile --analytic --tp {tp} ...)")
        else:
            notes.append(f"{SETUP_MISMATCH}profile {profile} prices tp_size {hw.tp_size}, but the line's server ran "
                         f"tp_size {tp}: the prediction is for the profile's setup (a profile for it: specsched "
                         f"profile --analytic --tp {tp} ...)")
    model = (prof.analytic or {}).get("model")
    kv_line = LINE_KV_BYTES.get(str(info.get("kv_cache_dtype")).lower())
    kv_prof = model.get("kv_cache_bytes") if isinstance(model, dict) else None
    if kv_line is not None and isinstance(kv_prof, (int, float)) and kv_prof != kv_line:
        notes.append(f"{SETUP_MISMATCH}profile {profile} prices a KV cache of {kv_prof:g} byte(s) an element, but the "
                     f"line's server ran kv_cache_dtype {info['kv_cache_dtype']!r} ({kv_line} byte(s)): the pool and "
                     f"the KV reads are the profile's (a profile for it: specsched profile --analytic "
                     f"--kv-cache-dtype {info['kv_cache_dtype']} ...)")
    _quantization_note(info, prof, profile, notes)
    line_model = info.get("model_path") or run.extra.get("model_id")
    prof_model = model.get("name") if isinstance(model, dict) else None
    if isinstance(line_model, str) and line_model and isinstance(prof_model, str) and prof_model:
        if _model_key(prof_model) not in _model_key(line_model):
            notes.append(f"{SETUP_MISMATCH}the line's server ran model {line_model!r}, the profile {profile} prices "
                         f"{prof_model!r}: if they differ the prediction is for the profile's model (a profile "
                         f"for it: specsched profile --analytic --model NAME_OR_CONFIG ...)")


def _int_or_1(v: Any) -> int:
    """``v`` when it is an int (not a bool), else 1 (a server_info width left out or unreadable)."""
    return v if isinstance(v, int) and not isinstance(v, bool) else 1


OTHER_SERVERS = {"vllm": "vLLM", "lmdeploy": "LMDeploy", "tgi": "TGI", "trt": "TensorRT-LLM",
                 "tensorrt-llm": "TensorRT-LLM", "deepspeed-mii": "DeepSpeed-MII", "llama.cpp": "llama.cpp",
                 "scalellm": "ScaleLLM", "truss": "Truss"}
"""bench_serving / vllm bench serve ``--backend`` prefixes that name a server other than
SGLang (the client speaks that server's API: SGLang 0.5.23 benchmark/serving.py
``ASYNC_REQUEST_FUNCS``; vLLM's ``vllm/benchmarks/lib/endpoint_request_func.py``)."""

QUANT_DTYPE = {"fp8": "fp8", "w8a8_fp8": "fp8", "modelopt_fp8": "fp8", "fbgemm_fp8": "fp8", "compressed-tensors": None,
               "modelopt_fp4": "nvfp4", "nvfp4": "nvfp4", "mxfp4": "mxfp4", "awq": "int4", "awq_marlin": "int4",
               "gptq": "int4", "gptq_marlin": "int4", "moe_wna16": "int4"}
"""server_info ``quantization`` (SGLang ``--quantization``) -> the weight dtype ``specsched profile
--analytic --dtype`` prices it as (None: not known from the name alone)."""


def _quantization_note(info: dict[str, Any], prof: Any, profile: str, notes: list[str]) -> None:
    """A :data:`SETUP_MISMATCH` when server_info ``quantization`` (SGLang ``--quantization``)
    names weights (:data:`QUANT_DTYPE`) the profile ``prof`` does not price: another
    ``analytic.dtype``, or a profile that states none (measured, hand-written). The weight
    bytes set the decode step and the KV pool, so an fp8 server predicted with a bf16 profile
    is ~1.7x slow (it was only listed as an argument left out)."""
    quant = str(info.get("quantization") or "").lower()
    want = QUANT_DTYPE.get(quant)
    if want is None:
        return
    dtype = (prof.analytic or {}).get("dtype")
    if not isinstance(dtype, str):
        notes.append(f"{SETUP_MISMATCH}the line's server ran quantization {quant!r} ({want} weights); the profile "
                     f"{profile} does not say which weights it prices: if not {want}, the decode step and the KV pool "
                     f"are another server's (an analytic one for it: specsched profile --analytic --dtype {want} ...)")
    elif dtype != want:
        notes.append(f"{SETUP_MISMATCH}the line's server ran quantization {quant!r} ({want} weights), the profile "
                     f"{profile} prices {dtype} weights: the decode step and the KV pool are the profile's (a profile "
                     f"for it: specsched profile --analytic --dtype {want} ...)")


def _server_notes(run: BenchRun, notes: list[str]) -> None:
    """Say which server the line measured when it is not SGLang: a ``--backend`` naming another
    server (:data:`OTHER_SERVERS`) and no SGLang ``server_info`` is a :data:`SETUP_MISMATCH`,
    since the prediction runs SGLang 0.5.23's scheduler (prefill batches before decode, no
    mixed chunk by default, new_token_ratio admission, retraction), which such a server does
    not run (vLLM V1 schedules the running decodes first in one token budget,
    max_num_batched_tokens, with chunked prefill after them: closest here is
    ``server.enable_mixed_chunk: true``); an OpenAI-compatible backend with no ``server_info``
    is said as unknown. (A weight format the profile does not price: :func:`_setup_notes`.)"""
    info = _line_server_info(run)
    sglang_info = isinstance(info, dict) and any(k in info for k in ("max_total_num_tokens", "chunked_prefill_size",
                                                                     "internal_states", "tp_size"))
    backend = str(run.args.get("backend") or "").lower()
    if not sglang_info and "sglang" not in backend:
        other = next((name for key, name in OTHER_SERVERS.items() if backend.startswith(key)), None)
        if other is not None:
            notes.append(f"{SETUP_MISMATCH}the line measured a {other} server (backend {backend!r}), not SGLang: the "
                         "prediction runs SGLang 0.5.23's scheduler and defaults (prefill batches before decode, no mixed "
                         "chunk, new_token_ratio admission), which it does not run"
                         + ("; vLLM V1 puts the running decodes first in one token budget with chunked prefill after "
                            "them: the closest here is --set server.enable_mixed_chunk=true" if other == "vLLM" else ""))
        elif backend.startswith("openai") or not backend:
            notes.append(f"server: the line does not say which server ran (backend {backend or 'not given'!r}, no "
                         "server_info); the prediction is SGLang's scheduler")


def _vision_note(run: BenchRun, notes: list[str]) -> None:
    """Say that a multimodal run's image tokens are prefilled as text: SGLang 0.5.4 on writes
    ``total_input_vision_tokens`` (a multimodal dataset such as ``image``), counted in
    ``total_input_tokens`` and so in the built prompts, while the vision encoder that made them
    (part of each measured TTFT) is not modelled."""
    v = run.extra.get("total_input_vision_tokens")
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
        tin = run.summary.get("total_input_tokens")
        share = f", {v / tin:.0%} of the input tokens" if tin and v <= tin else ""
        notes.append(f"prompts: {v:.0f} vision tokens (total_input_vision_tokens{share}, dataset "
                     f"{run.args.get('dataset_name', '?')!r}) are prefilled as text tokens; the vision encoder's time, "
                     "part of the measured TTFT, is not modelled")


def _assumed_drafter(acc: float, named: Any, profile: str, notes: list[str],
                     drafts: tuple[int, list[float] | None] | None = None,
                     state_with: str = "--template", window: Any = None) -> dict[str, Any]:
    """Server arguments for a run whose line says it decoded speculatively (an accept length)
    but not with which drafter and window: :data:`ASSUMED_DRAFTER` (with the chain drafter
    ``named`` by server_info instead of eagle, if the model has it), its steps, topk and draft
    tokens SGLang 0.5.23's choice for the profile's ``hardware.architecture`` when it has one
    (arg_groups/speculative_hook.py ``_auto_choose_speculative_params``: a 5/4/8 tree for
    Llama), its chain lengthened when the line's accept length would not fit its depth. A profile that prices no chain draft
    step (``gpu.draft_step``) gets its block drafter (dspark) at the profile's verify window
    instead, so the scenario runs. Says so in ``notes``.

    ``window``: server_info's ``speculative_num_draft_tokens`` for a drafter the model lacks
    (SGLang's NGRAM): the tokens each request verified a step (NGRAM's draft tree,
    srt/speculative/ngram_worker.py ``draft_token_num``; 12 when the launch names none,
    arg_groups/speculative_hook.py ``_handle_ngram``). The stand-in verifies that window, so
    the verify forwards are the server's; its draft is the stand-in's own (an NGRAM lookup runs
    on the host, with no draft forward), which the note says."""
    d = dict(ASSUMED_DRAFTER)
    kind = str(named).lower() if named is not None else ""
    if kind in SpecAlgorithm.__members__ and SpecAlgorithm(kind).enabled and not SpecAlgorithm(kind).is_block:
        d["speculative_algorithm"] = kind
    why = "SGLang's default EAGLE parameters"
    served = (window if drafts is None and isinstance(window, int) and not isinstance(window, bool)
              and window >= 2 and kind not in SpecAlgorithm.__members__ else None)

    def served_window(priced_as: str) -> str:   # the window is the server's, the draft the stand-in's
        return (f"server_info's speculative_num_draft_tokens {served}, the tokens the server's {named} verified per "
                f"request a step; the draft is priced as {priced_as}'s, not {named}'s"
                + (" (a host-side n-gram lookup, no draft forward)" if kind == "ngram" else ""))

    if served is not None:
        d.update(speculative_num_steps=served - 1, speculative_eagle_topk=1, speculative_num_draft_tokens=served)
        why = f"a chain at {served_window(d['speculative_algorithm'])}"
    if drafts is not None:   # vllm bench serve: its draft length is in the line
        k = drafts[0]
        d.update(speculative_num_steps=k, speculative_eagle_topk=1, speculative_num_draft_tokens=k + 1)
        why = (f"a chain of the line's {k} draft tokens per draft (spec_decode_draft_tokens / "
               "spec_decode_num_drafts); the drafter kind is not in the line")
    try:
        prof = load_profile(profile)
    except ConfigError:
        prof = None   # the caller reports a bad profile; the assumption stands without it
    gpu = prof.gpu if prof is not None else None
    arch = prof.hardware.architecture if prof is not None and prof.hardware is not None else None
    if served is None and drafts is None and arch is not None:
        # what SGLang launches with no chain setting: its choice for the model (a draft tree for
        # Llama and Grok), as sim/defaults.py fills a scenario that states none
        d.update(zip(CHAIN_PARAM_KEYS, auto_speculative_params(d["speculative_algorithm"], arch), strict=True))
        why = (f"SGLang's choice for {auto_speculative_basis(d['speculative_algorithm'], arch)} when no chain setting "
               "is launched, arg_groups/speculative_hook.py _auto_choose_speculative_params")
    if gpu is not None and gpu.draft_step is None:
        d = {"speculative_algorithm": "dspark",
             "speculative_num_draft_tokens": (drafts[0] + 1 if drafts else served or gpu.verify_window)
             or d["speculative_num_draft_tokens"]}
        why = f"profile {profile} prices no chain draft step, only its block drafter"
        if served is not None:
            why += f"; window: {served_window('dspark')}"
    w = d["speculative_num_draft_tokens"]
    depth = d["speculative_num_steps"] + 1 if "speculative_num_steps" in d else w   # a tree accepts its depth at most
    if drafts is None and acc >= depth - 0.05:   # a window of 4 cannot reach a mean of 3.95+
        d["speculative_num_draft_tokens"] = w = math.ceil(acc) + 1
        why += f"; window widened to {w} to fit the accept length"
        if "speculative_num_steps" in d:
            d.update(speculative_num_steps=w - 1, speculative_eagle_topk=1)
    modelled = kind in SpecAlgorithm.__members__ or kind == ""
    said = ("names the drafter but not its window" if kind == d["speculative_algorithm"]
            else "names its draft length but not the drafter kind" if drafts is not None and modelled
            else "names neither the drafter kind nor its window" if modelled
            # SGLang's NGRAM (a host-side n-gram lookup, no draft forward), which a scenario cannot name
            else f"names speculative_algorithm {named!r}, which is not modelled (no profile prices its draft)")
    args = ", ".join(f"{k} {v}" for k, v in d.items())
    notes.append(f"server: the line's accept_length {acc:.3f} says the server decoded speculatively, but the line "
                 f"{said}: assumed {args} ({why}); state the real ones with {state_with}")
    return d


def scenario_from_bench(run: BenchRun, profile: str, *, name: str | None = None, burstiness: float | None = None,
                        template: str | None = None, lengths: str = "args",
                        arrivals: str = "rate", dataset_path: str | None = None, dataset_offset: int | None = None,
                        agentic_max_turns: int | None = None,
                        num_conversations: int | None = None,
                        mooncake_num_rounds: int | None = None, mooncake_slowdown_factor: float | None = None,
                        state_with: str = "--template",
                        acceptance: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    """A scenario (plain dict, validated) reproducing ``run``'s arguments.

    Args:
        run: the bench_serving run.
        profile: profile name or path for the scenario.
        name: scenario name (default: the line's tag or the file's name and line).
        burstiness: gamma shape for the gaps (finite rate only).
        template: a scenario whose ``server``, ``acceptance`` and ``seed`` are kept.
        lengths: ``args`` (from the run's arguments where they say) or ``details``.
        arrivals: ``rate`` (arrivals drawn at the line's rate, the default) or ``details``
            (the run's own arrivals and lengths as a ``trace`` workload; vLLM's
            ``--save-detailed`` lines only, :func:`_trace_workload`).
        dataset_path, dataset_offset, agentic_max_turns, num_conversations: an
            ``agentic-trace`` line's trace file and bench_serving's --dataset-offset,
            --agentic-max-turns and --num-prompts (:func:`_agentic_workload`); a
            ``mooncake`` line's trace file and --num-prompts (rows), with
            ``mooncake_num_rounds`` and ``mooncake_slowdown_factor`` (:func:`_mooncake_workload`).
        state_with: the calling command's way to state server arguments the line lacks,
            named in the assumptions (``scenario from-bench``: ``--template``).
        acceptance: the ``acceptance`` block for a line whose server decoded speculatively
            but which states no accept length (:func:`_no_accept_length`; ``validate
            --measured``'s ``--set acceptance.KEY=VALUE``).

    Returns:
        (scenario dict, tables the caller writes beside the YAML: length histograms
        ``{"input"|"output": DataFrame(length, weight)}`` named in ``workload.*_len.path``,
        or ``{"trace": DataFrame(timestamp, input_length, output_length)}`` named in
        ``workload.trace.path``).

    Raises:
        ConfigError: a trace run, no way to know the lengths or the request count, a
            burstiness without a finite rate, or a resulting scenario that does not validate.
    """
    file, line = run.source.rsplit(":", 1)
    notes: list[str] = []
    agentic = run.args.get("dataset_name") == AGENTIC_DATASET
    mooncake = run.args.get("dataset_name") == MOONCAKE_DATASET
    given = {"dataset_path": dataset_path, "num_conversations": num_conversations, "dataset_offset": dataset_offset,
             "agentic_max_turns": agentic_max_turns, "mooncake_num_rounds": mooncake_num_rounds,
             "mooncake_slowdown_factor": mooncake_slowdown_factor}
    for k, v in given.items():
        if v is not None and run.args.get("dataset_name") not in trace_option_datasets(k):
            raise ConfigError("<command line>", TRACE_OPTIONS[k], v, "applies to a line with dataset_name "
                              f"{' or '.join(map(repr, trace_option_datasets(k)))} "
                              f"(this one is {run.args.get('dataset_name', '<missing>')!r})")
    if mooncake or agentic:
        # a replayed trace's arrivals and lengths come from its file, not from these options
        why = ("a mooncake line is rebuilt from its trace file (its timestamps and hash_ids; the lengths from the "
               "details where it has them)" if mooncake else
               "an agentic-trace line is rebuilt from its trace file only (conversation by conversation)")
        for opt, v, bad in (("--arrivals", arrivals, arrivals == "details"), ("--burstiness", burstiness, burstiness is not None),
                            ("--lengths", lengths, lengths == "details")):
            if bad:
                raise ConfigError("<command line>", opt, v, f"{why}: leave {opt} out")
    if mooncake:
        workload, wnotes, trace = _mooncake_workload(run, dataset_path, mooncake_num_rounds, mooncake_slowdown_factor,
                                                     num_conversations)
        tables = {"trace": trace}
        notes += wnotes
    elif agentic:
        workload, wnotes = _agentic_workload(run, dataset_path, dataset_offset, agentic_max_turns, num_conversations)
        tables: dict[str, pd.DataFrame] = {}
        notes += wnotes
    elif arrivals == "details" or (burstiness is None and _sent_over_time(run)):
        if burstiness is not None:
            raise ConfigError("<command line>", "--burstiness", burstiness, "does not apply with --arrivals details")
        if arrivals != "details":
            notes.append(_sent_over_time(run))
        workload, wnotes, trace = _trace_workload(run)
        tables = {"trace": trace}
        notes += wnotes
    else:
        workload, wnotes = _workload(run, burstiness)
        gsp = _gsp_defaults(run, workload["num_requests"]) if lengths == "args" else None
        if gsp is not None:   # the generated-shared-prefix prompts, as SGLang's defaults make them
            workload.update(shared_prefix=gsp[0], output_len=gsp[1])
            lnotes, tables = [gsp[2]], {}
        else:
            ins, outs, lnotes, tables = _lengths(run, lengths)
            workload.update(input_len=ins, output_len=outs)
        notes += wnotes + lnotes
        if workload["kind"] in ("burst", "closed_loop") and "endpoint_type" in run.extra:
            # at inf with --max-concurrency C vLLM sends through a semaphore of C (serve.py
            # benchmark(): limited_request_func), a closed loop of C clients, not all at once
            how = ("all at once (request_rate inf)" if workload["kind"] == "burst" else
                   f"a closed loop of {workload['concurrency']} clients (request_rate inf with max_concurrency "
                   f"{workload['concurrency']}: each finished request lets the next one in)")
            notes.append(f"arrivals: {how}; vllm bench serve --dataset-name timed_trace (0.23 on) "
                         "also writes inf while it sends at the trace's timestamps, and the line does not name its "
                         "dataset: for such a run write a 'trace' workload for the trace file")
        if run.extra.get("streamed") is False:
            notes.append("metrics: the run's replies were not streamed (bench_serving --disable-stream: every ITL 0, its "
                         "TTFT the whole reply): its TTFT, TPOT and ITL figures are not compared, E2E latency and the "
                         "throughputs are")
        if run.extra.get("probe_completed"):
            notes.append(f"load: the run also sent {run.extra['probe_completed']} probe requests "
                         "(vllm bench serve --probe-request-rate, not counted in the line's figures); the scenario "
                         "does not send them")
        if workload["kind"] == "poisson" and run.details is not None and run.details.start_s is not None:
            # the drawn arrivals are another draw than the measured run's: near saturation one
            # draw's luck moves throughput and TTFT by tens of percent (docs/real-servers.md)
            notes.append("arrivals: drawn at the line's rate, though the line holds its own send times: to compare with "
                         "this run, `--arrivals details` replays them (validate-bench and calibrate --from replay them "
                         "by default)")
    sc: dict[str, Any] = {
        "name": name or _tag_name(run, f"{_file_label(file)}-line{line}", notes),
        "description": f"Built by `specsched scenario from-bench` from bench_serving run {Path(file).name}:{line} "
                       f"(backend {run.args.get('backend', '?')}, dataset {run.args.get('dataset_name', '?')}).",
        "source": f"bench_serving {Path(file).name}:{line}",
        "assumptions": [],
        "profile": profile,
        "seed": int(run.args.get("seed", 1)),
    }
    if template:
        # what the template's file states, as stated: a value equal to the schema's default
        # (admission_delay: none) is still a choice, which the run's hardware defaults must not
        # overwrite (DSpark's automatic min_free_slots delay, sim/defaults.py resolve_server); the
        # keys it leaves out are filled for the run's profile, not the template's
        t = load_scenario(template, resolve_defaults=False)
        sc["server"] = t.server.model_dump(mode="json", exclude_unset=True)
        sc["acceptance"] = t.acceptance.model_dump(mode="json", exclude_unset=True)
        notes.append(f"server and acceptance from the template {Path(template).name}")
        notes += _template_server_notes(run, t.server, Path(template).name)
    else:
        sc["server"] = _server(run, notes, state_with)
    _setup_notes(run, profile, notes)
    _server_notes(run, notes)
    _vision_note(run, notes)
    acc = _accept_length(run)
    tpl_acc = None
    if template:
        # a template without a drafter for a line whose server drafted (or the reverse) was
        # taken silently: the prediction decoded one token a step against a speculative run
        contradiction = speculation_mismatch(run, t.server, t.acceptance, f"the template {Path(template).name}")
        if contradiction is not None:
            notes.append(contradiction)
        elif t.server.speculative_algorithm.enabled:   # without a drafter its accept length verifies nothing
            tpl_acc = sc["acceptance"].get("mean_accept_length")
    if acc is not None and isinstance(tpl_acc, (int, float)) and abs(tpl_acc - acc) > 0.02 * acc:
        # the line measured its own: a template reused for a run on another dataset accepts otherwise
        notes.append(f"{SETUP_MISMATCH}acceptance: the template's mean accept length {tpl_acc:.3f}, not the line's measured "
                     f"{acc:.3f}: the prediction verifies at the template's (set the line's in the template's acceptance)")
    drafts = _vllm_drafts(run) if acc is not None else None
    spec = SpecAlgorithm(sc["server"].get("speculative_algorithm", "none")).enabled
    if acc is not None and not spec and not template:
        info = run.extra.get("server_info")
        named = info.get("speculative_algorithm") if isinstance(info, dict) else None
        window = info.get("speculative_num_draft_tokens") if isinstance(info, dict) else None
        sc["server"].update(_assumed_drafter(acc, named, profile, notes, drafts, state_with, window))
        spec = True
    if acc is not None and spec and not template:
        # the window the server verified, as the model resolves it: a chain drafter's steps at
        # topk 1 verify steps + 1 tokens though server_info may leave the draft tokens null
        # (the accept length was clipped to a window of 1: read as no speculation at all)
        try:
            window = ServerArgs.model_validate(sc["server"]).spec_window
        except ValidationError:   # refused below, as the whole scenario, naming the line
            window = sc["server"].get("speculative_num_draft_tokens", 1)
        if drafts is not None and drafts[1] is not None and window == drafts[0] + 1:
            sc["acceptance"] = {"per_position_rates": [round(r, 6) for r in drafts[1]]}
            notes.append("acceptance: per-position rates from the line's spec_decode_per_position_acceptance_rates "
                         f"(each over the previous: {', '.join(f'{r:.3f}' for r in drafts[1])}; accept length "
                         f"{acc:.3f})")
        else:
            used = float(min(max(acc, 1.0), window))
            sc["acceptance"] = {"mean_accept_length": used}
            # SGLang's is /server_info's avg_spec_accept_length: the scheduler's totals since
            # launch (internal_state.py _average_accept_length), reset only by /flush_cache
            # (metrics_reporter.reset_metrics); vLLM's spec_decode_acceptance_length is the run's
            since = ("" if run.extra.get("spec_decode_acceptance_length") is not None else
                     " (SGLang's avg_spec_accept_length: its mean over every verify since the server started, earlier runs "
                     "and warmup requests included, unless bench_serving ran with --flush-cache)")
            if used != acc:   # the note said the line's figure beside a scenario holding the cut one
                notes.append(f"{SETUP_MISMATCH}acceptance: the line's accept length {acc:.3f} is outside the verify window "
                             f"(1-{window} tokens per request a step) of the drafter its server_info names, so that drafter "
                             f"did not measure it: the prediction accepts {used:g} (state the real drafter with "
                             f"{state_with})")
            else:
                from specsched.analysis.accept_spread import acceptance_from_chunks

                # a detailed line says how the requests differ too (their streamed chunks)
                spread = acceptance_from_chunks(run, acc, window)
                if spread is not None:
                    sc["acceptance"], said = spread
                    notes.append(said)
                else:
                    notes.append(f"acceptance: mean accept length {acc:.3f} from the line{since}")
    if acc is None and spec and not template and not acceptance and _prefill_only(run):
        sc["acceptance"] = {"mean_accept_length": 1.0}
        notes.append("acceptance: the line states no accept length and none of its requests generated past its "
                     "prefill's token, so no verify ran (SGLang writes null until one has): the accept length changes "
                     "nothing here; 1.0 is filled in")
    elif acc is None and spec and not template:
        if not acceptance:
            raise _no_accept_length(run, sc["server"], state_with)
        sc["acceptance"] = dict(acceptance)
        notes.append(f"acceptance: {', '.join(f'{k} {v}' for k, v in acceptance.items())} as given (the line states "
                     "no accept length)")
    ratio = run.summary.get("steady_concurrency_ratio")
    if ratio is not None:
        # steady_state_serving's record after the line (sim/bench_serving.py _pair_steady): the
        # prediction reports the same window (its --steady-state-concurrency-ratio)
        workload["steady_state_concurrency_ratio"] = float(ratio)
        notes.append(f"steady state: the line's steady_state_serving window (--steady-state-concurrency-ratio {ratio:g}) "
                     "is predicted too, as workload.steady_state_concurrency_ratio")
    sc["workload"] = workload
    if template:
        _template_arms(t.arms, sc, Path(template).name, notes)
    if ONE_BATCH in run.extra:
        _one_batch_notes(run, sc, notes)
    sc["reference"] = {"base": {k: float(run.summary[k]) for k in REFERENCE_KEYS
                                if k in run.summary and math.isfinite(run.summary[k])}}
    sc["assumptions"] = notes
    try:
        Scenario.model_validate({**sc, "path": ""})
    except ValidationError as e:
        raise validation_error(run.source, e, sc) from None
    return sc, tables


def _template_arms(arms: dict[str, dict[str, Any]], sc: dict[str, Any], name: str, notes: list[str]) -> None:
    """Keep ``--template``'s arms (other than ``base``, which is the line's run) in the built
    scenario ``sc``, as what-ifs on the measured workload: an arm that overrides a key the line
    set (its rate, its server_info's chunk size) is applied over the line's value, as an arm
    is over its own file's. They were dropped: ``run OUT --arm no_overlap`` was refused
    (allowed: base). An arm that does not validate on the line's scenario (an override of a
    workload key the line's workload kind has no use for) is left out, naming why."""
    kept, left = {}, []
    for arm, over in arms.items():
        if arm == "base":
            continue
        try:
            _resolve_arm(Path(""), {**sc, "arms": {arm: over}}, arm)
        except ConfigError as e:
            left.append(f"{arm} ({e.key.removeprefix(f'arms.{arm}.')}: {clipped(e.allowed, 80)})")
            continue
        kept[arm] = copy.deepcopy(over)
    if kept:
        sc["arms"] = kept
        notes.append(f"arms: the template {name}'s arms kept ({', '.join(kept)}): what-ifs on the line's workload, "
                     "each applied over the line's values as over the template's (`specsched run SCENARIO --arm NAME`)")
    if left:
        notes.append(f"arms: the template {name}'s arms not valid on the line's scenario, left out: {'; '.join(left)}")


def _one_batch_notes(run: BenchRun, sc: dict[str, Any], notes: list[str]) -> None:
    """The assumptions of a scenario built from a ``bench_one_batch_server`` line
    (:func:`sim.bench_serving.one_batch_line`), and ``max_running_requests`` raised to the
    batch where the server's resolved default would queue part of it (SGLang's
    ``run_benchmark_internal`` skips a batch size above the server's running limit unless
    ``--enable-multi-batch``, so a written line ran its whole batch at once)."""
    bs = int(run.summary["completed"])
    layout = run.extra[ONE_BATCH]
    notes.append(f"bench_one_batch_server ({layout}): {bs} request(s) in one /generate call, all at once (a burst), "
                 "each exactly input_len and output_len tokens (ignore_eos), after a warm-up and /flush_cache (no "
                 "prefix-cache hit); compared: duration = latency, max_ttft_ms = last_ttft x 1000, output_throughput = "
                 "total output / latency, decode_window_output_throughput = the line's output_throughput, "
                 "prefill_window_input_throughput = its input_throughput, total_throughput = overall_throughput, "
                 "accept_length = acc_length where > 0 (whichever the line holds)")
    hit = warmed_cache(run)
    if hit is not None:
        notes.append(f"cache: the line's cache_hit_rate {hit:g}: a warm-up cached part of each prompt before the "
                     "timed batch (bench_one_batch_server --cache-hit-rate); this scenario starts from an empty cache "
                     "and prefills every prompt whole, so its max_ttft_ms and duration read high, and its "
                     "prefill_window_input_throughput, output_throughput and total_throughput (over the whole latency) "
                     "low, by the prefill those hits skipped")
    if "max_running_requests" in sc["server"]:
        return
    try:
        from specsched.sim.defaults import resolve_loaded

        cap = resolve_loaded(Scenario.model_validate({**sc, "path": ""})).server.max_running_requests
    except (ConfigError, ValidationError):   # refused below, as the whole scenario, naming the line
        return
    if cap < bs:
        sc["server"]["max_running_requests"] = bs
        notes.append(f"server: max_running_requests {bs} (the batch): the default here would be {cap}, and "
                     "bench_one_batch_server skips a batch larger than the server's running limit (unless "
                     "--enable-multi-batch), so this one ran whole")


WARM_CACHE_FIGURES = ("max_ttft_ms", "prefill_window_input_throughput", "duration", "output_throughput",
                      "total_throughput")
"""The figures of a ``bench_one_batch_server`` line whose time holds its timed batch's prefill
(:func:`sim.bench_serving.one_batch_line`: ``last_ttft``, and ``latency`` from the send), which a
``--cache-hit-rate`` warm-up shortened (:func:`warmed_cache`); its decode window's throughput
(after ``last_ttft``) runs no prefill."""


def warmed_cache(run: BenchRun) -> float | None:
    """The line's ``cache_hit_rate`` where ``run`` is a ``bench_one_batch_server`` line whose
    ``--cache-hit-rate`` warm-up cached part of each prompt before the timed batch, else None.

    SGLang 0.5.23 benchmark/one_batch_server.py ``run_one_case``: with ``--cache-hit-rate R`` > 0,
    ``_warmup_cache`` sends each prompt's first ``int(input_len x R)`` tokens before the timed
    ``/generate`` call, so that call's prefill skips them; the line's ``cache_hit_rate`` is the
    server's cached over prompt tokens during the case (``calculate_cache_hit_rate``), 0 after a
    cold one. A scenario built from the line starts from an empty cache and prefills every prompt
    whole: its :data:`WARM_CACHE_FIGURES` are not the prediction's (the predicted times are longer,
    the throughputs lower; ``scenario from-bench`` says so, ``calibrate --from`` leaves them out of
    the fit)."""
    hit = run.extra.get("cache_hit_rate")
    if ONE_BATCH in run.extra and isinstance(hit, (int, float)) and not isinstance(hit, bool) and hit > 0:
        return float(hit)
    return None


def null_accept_length(run: BenchRun, state_with: str = "--template") -> ConfigError | None:
    """The refusal :func:`scenario_from_bench` raises without a template for ``run`` when its
    server decoded speculatively (its server_info names a modelled drafter) and the line states
    no accept length (:func:`_no_accept_length`), else None: a fit of a whole file leaves such a
    line out instead (the first short run after a launch writes null; the file's later lines
    carry one)."""
    if _accept_length(run) is not None or _prefill_only(run):
        return None
    server = _server(run, [], state_with)
    if not SpecAlgorithm(server.get("speculative_algorithm", "none")).enabled:
        return None
    return _no_accept_length(run, server, state_with)


def _prefill_only(run: BenchRun) -> bool:
    """Whether no request of ``run`` generated past the token its prefill makes (a TTFT
    benchmark, ``--random-output-len 1``): its successful requests' ``output_lens`` (details)
    are all at most 1, or without details its completed requests generated at most one token
    each on the whole (``total_output_tokens`` <= ``completed``; a successful request has at
    least its prefill's token). Such a run never verifies, so a speculative server's accept
    length is null in its line (SGLang 0.5.23 internal_state.py ``_average_accept_length``:
    None while ``spec_total_num_forward_ct`` is 0) and no accept length changes its
    prediction."""
    d = run.details
    if d is not None and d.ok.any():
        return bool((d.output_lens[d.ok] <= 1).all())
    n, tout = run.summary.get("completed"), run.summary.get("total_output_tokens")
    return bool(n) and tout is not None and tout <= n


def _no_accept_length(run: BenchRun, server: dict[str, Any], state_with: str) -> ConfigError:
    """The refusal of a line whose server decoded speculatively (its server_info names the
    drafter) while its ``accept_length`` is null: SGLang 0.5.23 bench_serving writes /server_info's
    ``internal_states[0].avg_spec_accept_length``, which the scheduler leaves out until it has
    added a verify count to its totals (managers/scheduler_components/internal_state.py
    ``_average_accept_length``: None while ``spec_total_num_forward_ct`` is 0), and those totals
    grow only when a decode line is logged, every ``decode_log_interval`` (default 40) decode
    steps (metrics_reporter.py ``report_decode_stats``), and restart at every /flush_cache
    (``reset_metrics``): a short run after a launch or a ``--flush-cache`` writes null. The
    scenario failed validation with "set acceptance.mean_accept_length", which none of the
    commands building it let the user do (``validate --measured``'s ``--set`` came after)."""
    log = "the accept len of the server log's decode lines"
    how = (f"--set acceptance.mean_accept_length=X, X {log}" if "--set" in state_with else
           f"{state_with}, a scenario whose acceptance.mean_accept_length is {log}")
    return ConfigError(run.source, "accept_length", None,
                       f"the line's server decoded speculatively (server_info speculative_algorithm "
                       f"{server.get('speculative_algorithm')!r}) but the line states no accept length (SGLang writes "
                       "null until the scheduler's first decode log line since launch or /flush_cache: "
                       f"internal_state.py _average_accept_length): give it with {how}")


def check_drafter_priced(run: BenchRun, server: dict[str, Any], profile: str, state_with: str = "--template") -> None:
    """Refuse, naming the line, a drafter from its server_info that ``profile`` cannot price:
    a chain drafter (EAGLE, MTP, ...) whose cycle runs draft forwards besides the one the
    profile's ``gpu.verify`` holds needs ``gpu.draft_step`` (sim/cost_model.py ``CostModel``
    refuses it at run time). ``scenario from-bench`` calls it before writing: the scenario was
    written, then refused by every run of it, naming the profile's key rather than the line's
    server. (``validate --measured`` and ``calibrate --from`` run what they build at once, and
    their ``--set`` / ``--scenario-template`` can still change the drafter, so they do not.) A
    drafter assumed from an accept length alone already falls back to the profile's block
    drafter (:func:`_assumed_drafter`)."""
    try:
        gpu = load_profile(profile).gpu
    except ConfigError:
        return   # the caller reports a bad profile
    args = ServerArgs.model_validate(server)
    spec = args.speculative_algorithm
    if not spec.enabled or gpu.draft_step is not None:
        return
    if args.num_draft_forwards > 1 or not gpu.verify_includes_draft:
        raise ConfigError(run.source, "server_info.speculative_algorithm", spec.value,
                          f"profile {profile} prices no draft step (gpu.draft_step), which this chain drafter's "
                          f"{args.num_draft_forwards} draft forwards a cycle need: give a profile that has one "
                          "(specsched profile --analytic ... --drafter chain), or state the server with "
                          f"{state_with}")


def _file_label(file: str) -> str:
    """The results file's stem for a scenario's default name; a stream (``<(zcat runs.gz)``:
    ``/dev/fd/63``, ``/dev/stdin``) has no name of its own, so ``bench_serving``."""
    from specsched.sim.input_files import is_stream

    return "bench_serving" if is_stream(file) else Path(file).stem


TAG_NAME_BYTES = 120
"""The longest scenario name (UTF-8 bytes) made from a line's tag: results folders are named
``<name>/<arm>-seed<N>+<overrides>`` and a file name holds at most 255 bytes."""


def _tag_name(run: BenchRun, default: str, notes: list[str]) -> str:
    """The scenario name from the line's ``tag`` (bench_serving ``--tag``, a free-form label:
    ``"h200/llama 8b"``), made one folder name as a scenario name must be (each run of ``/``,
    ``\\`` or control characters, newline, tab and Unicode line breaks (U+0085, U+2028,
    U+2029) included, as ``_``, outer spaces dropped, cut to :data:`TAG_NAME_BYTES` bytes
    of UTF-8 so that the results folder it names can be made (a file name holds 255); said
    in ``notes`` when changed), else
    ``default``. A tag with a separator was refused as a bad ``name``, a key the line does
    not have."""
    tag = run.extra.get("tag")
    if tag is None or not str(tag).strip():
        return default
    name = re.sub(r"[/\\\x00-\x1f\x7f-\x9f\u2028\u2029]+", "_", str(tag)).strip()
    if len(name.encode()) > TAG_NAME_BYTES:   # "results/<name>/...: File name too long" after the run
        name = name.encode()[:TAG_NAME_BYTES].decode(errors="ignore").strip()
    if not is_path_component(name):   # "." or ".."
        name = default
    if name != tag:
        notes.append(f"name: {name!r}, a folder name made from the line's tag {clipped(tag)!r} (--name sets another)")
    return name


def table_path(out: str | Path, key: str) -> Path:
    """The file :func:`write_scenario` writes a table to beside the YAML ``out``: ``trace`` as
    ``<stem>-trace.csv``, ``input``/``output`` lengths as ``<stem>-<key>-lengths.csv``."""
    out = Path(out)
    return out.with_name(f"{out.stem}-trace.csv" if key == "trace" else f"{out.stem}-{key}-lengths.csv")


def write_scenario(sc: dict[str, Any], tables: dict[str, pd.DataFrame], out: str | Path) -> list[Path]:
    """Write the scenario YAML (and its length histograms beside it, ``<stem>-<input|output>-lengths.csv``),
    each atomically; histograms first, so a YAML never names a missing file. Returns the paths.

    A profile given as a path to a file (``--profile my.yaml``, read from the working folder)
    is written relative to the YAML's folder, as a scenario's profile path is read
    (:func:`sim.profile.resolve_profile_path`): the scenario then runs from any folder, and
    ``--out elsewhere/s.yaml`` still finds it. A bundled profile's name stays a name. A profile
    given as a stream (``--profile <(...)``) is copied beside the YAML as
    ``<stem>-profile.yaml`` and named so."""
    from specsched.analysis.io import atomic_write, atomic_write_text
    from specsched.sim.input_files import is_stream, read_input

    out = Path(out)
    prof = Path(str(sc["profile"]))
    written = []
    if is_stream(prof):
        # a stream (``--profile <(...)``, /dev/stdin) is gone once this command ends: the
        # scenario names a copy of its bytes beside it, not /dev/fd/N
        copy = out.with_name(f"{out.stem}-profile.yaml")
        data = read_input(prof, "a profile YAML")
        atomic_write(copy, lambda tmp: Path(tmp).write_bytes(data))
        sc["profile"] = copy.name
        written.append(copy)
    elif prof.is_file():
        try:
            sc["profile"] = Path(os.path.relpath(prof.resolve(), out.resolve().parent)).as_posix()
        except ValueError:   # another drive: no relative path
            sc["profile"] = str(prof.resolve())
    for key, df in tables.items():
        p = table_path(out, key)
        atomic_write(p, lambda tmp, df=df: df.to_csv(tmp, index=False))
        (sc["workload"]["trace"] if key == "trace" else sc["workload"][f"{key}_len"])["path"] = p.name
        written.append(p)
    atomic_write_text(out, yaml.safe_dump(sc, sort_keys=False, width=100))
    return [out, *written]
