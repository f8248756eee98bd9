"""Analytic profiles against the public measurements in benchmarks/public_measurements.yaml
(docs/analytic-profiles.md, "Against public measurements").

``python benchmarks/public_measurements.py [--file YAML] [--spec] [--seeds 2]`` predicts every
``decode`` entry from the analytic model with its default efficiency factors (nothing is
fitted to these figures): one request's decode rate is batch / the graph-replayed decode
step at the run's mean context. It prints public vs predicted, the step split into the
model's terms (linear layers' weights, attention, LM head and logits, TP all-reduces,
per-kernel gaps), and for a framework that lays the model out differently from SGLang
(``layout`` in the entry) the prediction with that layout too. ``--spec`` also runs the
``spec`` entries through benchmarks/public_spec.py (closed loops; minutes).

A prediction that misses by more than :data:`MISS` is flagged with the term that dominates
its step, which is where the missing mechanism has to be.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

import yaml
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import ModelArch, from_hf_config, load_model
from specsched.sim.analytic.roofline import BF16, Efficiency, ForwardCost, Parallel, decode_like
from specsched.sim.errors import ConfigError, clipped

DATA = Path(__file__).resolve().parent / "public_measurements.yaml"
MISS = 0.15
"""A prediction further than this from the public figure (relative) is a miss to explain."""
REQUIRED = ("id", "kind", "model", "gpu", "tp", "figure", "unit", "framework", "source", "url", "setting",
            "quote_checked", "confidence")
DECODE_KEYS = ("dtype", "batch", "context")
KINDS = ("decode", "spec")
LAYOUTS = ("replicated_lm_head",)
TERMS = ("linear_s", "experts_s", "attention_s", "lm_head_s", "allreduce_s", "overhead_s")
TERM_NAMES = {"linear_s": "linear weights (GEMM/GEMV)", "experts_s": "routed experts", "attention_s": "attention",
              "lm_head_s": "LM head + logits", "allreduce_s": "TP all-reduce", "overhead_s": "kernel gaps + launch"}


def load(path: Path = DATA) -> dict[str, Any]:
    """The data file, checked: every measurement has :data:`REQUIRED` keys (and
    :data:`DECODE_KEYS` for a decode entry), a known kind and layout, a positive figure, a
    unique id, and a model that is a shipped name or a key of ``configs``.

    Raises:
        ConfigError: one line naming the file, the entry and the key at fault.
    """
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(str(path), "(file)", clipped(e), "a readable YAML file") from None
    if not isinstance(data, dict) or not isinstance(data.get("measurements"), list):
        raise ConfigError(str(path), "measurements", None, "a list of measurements")
    configs = data.get("configs") or {}
    seen: set[str] = set()
    for i, m in enumerate(data["measurements"]):
        if not isinstance(m, dict):
            raise ConfigError(str(path), f"measurements[{i}]", clipped(m), "a mapping")
        where = f"measurements[{i}] ({m.get('id')})."
        for key in REQUIRED + (DECODE_KEYS if m.get("kind") == "decode" else ()):
            if m.get(key) in (None, ""):
                raise ConfigError(str(path), where + key, m.get(key), "missing: every measurement states it")
        if m["kind"] not in KINDS:
            raise ConfigError(str(path), where + "kind", m["kind"], f"one of {', '.join(KINDS)}")
        if m.get("layout") is not None and m["layout"] not in LAYOUTS:
            raise ConfigError(str(path), where + "layout", m["layout"], f"one of {', '.join(LAYOUTS)}")
        if isinstance(m["figure"], bool) or not isinstance(m["figure"], (int, float)) or m["figure"] <= 0:
            raise ConfigError(str(path), where + "figure", m["figure"], "a number > 0")
        if m["id"] in seen:
            raise ConfigError(str(path), where + "id", m["id"], "unique: it appears twice")
        seen.add(m["id"])
        if isinstance(m["tp"], bool) or not isinstance(m["tp"], int) or m["tp"] < 1:
            raise ConfigError(str(path), where + "tp", m["tp"], "an integer >= 1")
        if m["kind"] == "decode":
            for key, lo in (("batch", 1), ("context", 0)):
                if isinstance(m[key], bool) or not isinstance(m[key], (int, float)) or m[key] < lo:
                    raise ConfigError(str(path), where + key, m[key], f"a number >= {lo}")
            load_gpu(m["gpu"])
            if m["model"] not in configs:
                load_model(m["model"])
    return data


def arch_of(data: dict[str, Any], name: str) -> ModelArch:
    """A ``configs`` entry of the data file, else a shipped model."""
    cfg = (data.get("configs") or {}).get(name)
    if cfg is None:
        return load_model(name)
    return from_hf_config({k: v for k, v in cfg.items() if k != "source"}, name, str(DATA))


def replicated_lm_head_s(arch: ModelArch, tp: int, eff: Efficiency, hbm_tbps: float) -> float:
    """Seconds a TP rank spends reading the LM head rows SGLang would have split off
    (``ParallelLMHead``): ``(1 - 1/tp)`` of ``vocab x hidden`` bf16 at the HBM figure, for a
    framework that keeps the whole head on every rank."""
    return (1 - 1 / tp) * arch.vocab_size * arch.hidden_size * BF16 / (hbm_tbps * 1e12 * eff.hbm)


def predict_decode(data: dict[str, Any], m: dict[str, Any], eff: Efficiency | None = None) -> dict[str, Any]:
    """Predicted decode rate of one decode entry: ``tok_s`` (per request: 1 / step), the
    step's :class:`ForwardCost`, ``layout_tok_s`` with the entry's layout (None without one),
    the relative errors, the dominant term and ``term_ratio``: how many times its modelled
    time that term alone would have to take for the step to meet the public figure."""
    eff = eff or Efficiency()
    arch, gpu = arch_of(data, m["model"]), load_gpu(m["gpu"])
    cost: ForwardCost = decode_like(arch, gpu, Parallel(m["tp"], m["dtype"]), eff, m["batch"], 1, m["context"])
    step = cost.graph_s
    layout_step = None
    if m.get("layout") == "replicated_lm_head":
        layout_step = step + replicated_lm_head_s(arch, m["tp"], eff, gpu.hbm_tbps)
    tok_s = 1 / step
    out = {"tok_s": tok_s, "cost": cost, "error": tok_s / m["figure"] - 1,
           "layout_tok_s": None if layout_step is None else 1 / layout_step,
           "layout_error": None if layout_step is None else 1 / layout_step / m["figure"] - 1,
           "dominant": max(TERMS, key=lambda t: getattr(cost, t))}
    # what the dominant term alone would have to cost for the step to meet the public figure
    term = getattr(cost, out["dominant"])
    out["term_ratio"] = (m["batch"] / m["figure"] - (step - term)) / term
    return out


def decode_rows(data: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(entry, prediction) for every decode entry, in file order."""
    return [(m, predict_decode(data, m)) for m in data["measurements"] if m["kind"] == "decode"]


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x * 100:+.0f} %"


def print_decode(data: dict[str, Any]) -> None:
    print("Decode at batch 1 (tok/s per request), analytic model, default factors; step terms in ms")
    print(f"  {'id':<26}{'model':<13}{'gpu':<9}{'tp':>3} {'dtype':<6}{'public':>8}{'predicted':>10}{'error':>7}"
          f"{'layout':>9}{'error':>7}  " + " ".join(f"{t[:-2]:>9}" for t in TERMS) + "  conf.")
    for m, p in decode_rows(data):
        c = p["cost"]
        lay = "" if p["layout_tok_s"] is None else f"{p['layout_tok_s']:.1f}"
        flag = " MISS" if abs(p["error"]) > MISS and (p["layout_error"] is None or abs(p["layout_error"]) > MISS) else ""
        print(f"  {m['id']:<26}{m['model']:<13}{m['gpu']:<9}{m['tp']:>3} {m['dtype']:<6}{m['figure']:>8.2f}"
              f"{p['tok_s']:>10.1f}{_pct(p['error']):>7}{lay:>9}{_pct(p['layout_error']):>7}  "
              + " ".join(f"{getattr(c, t) * 1e3:>9.3f}" for t in TERMS)
              + f"  {m['confidence'].split(':')[0].split(' ')[0]}{flag}")
        if flag:
            term = getattr(c, p["dominant"])
            print(f"      -> {p['dominant'][:-2]} is {term / c.graph_s * 100:.0f} % of the step "
                  f"({TERM_NAMES[p['dominant']]}); alone it would have to take {p['term_ratio']:.2f}x the "
                  "model's time to meet the public figure")
    print(f"  layout: the prediction with the framework's own layout where it differs from SGLang's "
          f"({', '.join(LAYOUTS)}); MISS: both further than {MISS * 100:.0f} % from the public figure")


def _public_spec():
    spec = importlib.util.spec_from_file_location("_public_spec", Path(__file__).parent / "public_spec.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", default=str(DATA), help="the data file (default: %(default)s)")
    ap.add_argument("--spec", action="store_true", help="also run the spec entries (benchmarks/public_spec.py)")
    ap.add_argument("--seeds", type=int, default=2, help="seeds of each spec closed loop (default 2)")
    a = ap.parse_args(argv)
    try:
        data = load(Path(a.file))
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print_decode(data)
    if a.spec:
        return _public_spec().main(["--seeds", str(a.seeds)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
