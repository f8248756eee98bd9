"""benchmarks/public_measurements.py and its data file: every public figure carries its source
and setting, the loader refuses an entry without them, and each decode prediction is the
analytic step it says it is."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import load_model
from specsched.sim.analytic.roofline import Efficiency, Parallel, decode_like
from specsched.sim.errors import ConfigError

from tests.conftest import load_benchmark

pm = load_benchmark("public_measurements")
ps = load_benchmark("public_spec")


def test_shipped_file_loads_and_feeds_both_scripts():
    """The data file passes its own checks; public_spec's cases are exactly its spec entries."""
    data = pm.load()
    spec = {m["id"] for m in data["measurements"] if m["kind"] == "spec"}
    assert spec and set(ps.CASES) == spec
    for m in data["measurements"]:
        assert m["url"].startswith("https://") and m["confidence"].split()[0].rstrip(":") in ("high", "medium", "low")


def test_decode_prediction_is_the_graph_step():
    """tok/s is batch / the sum of the step's terms; the error is against the entry's figure."""
    data = pm.load()
    rows = pm.decode_rows(data)
    assert len(rows) == sum(m["kind"] == "decode" for m in data["measurements"])
    for m, p in rows:
        c = p["cost"]
        assert p["tok_s"] == pytest.approx(m["batch"] / sum(getattr(c, t) for t in pm.TERMS), rel=1e-9)
        assert p["error"] == pytest.approx(p["tok_s"] / m["figure"] - 1)
        assert p["dominant"] in pm.TERMS


@settings(max_examples=20, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]))
def test_replicated_lm_head_costs_what_the_split_saves(tp):
    """A framework that keeps the whole LM head on every rank reads (1 - 1/tp) of it more per
    step: nothing at TP1, more with every doubling of TP."""
    data = {"configs": {}, "measurements": []}
    m = {"model": "llama-3.1-8b", "gpu": "A100-80G", "tp": tp, "dtype": "bf16", "batch": 1, "context": 100,
         "figure": 100.0, "layout": "replicated_lm_head"}
    p = pm.predict_decode(data, m)
    arch, gpu = load_model("llama-3.1-8b"), load_gpu("A100-80G")
    base = decode_like(arch, gpu, Parallel(tp, "bf16"), Efficiency(), 1, 1, 100).graph_s
    extra = 1 / p["layout_tok_s"] - base
    head = arch.vocab_size * arch.hidden_size * 2 / (gpu.hbm_tbps * 1e12 * Efficiency().hbm)
    assert extra == pytest.approx(head * (1 - 1 / tp), abs=1e-12)


def _write(tmp_path, entries, configs=None):
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump({"configs": configs or {}, "measurements": entries}))
    return path


GOOD = {"id": "a", "kind": "decode", "model": "llama-3.1-8b", "gpu": "H100", "tp": 1, "dtype": "bf16", "batch": 1,
        "context": 100, "figure": 150.0, "unit": "tok/s", "framework": "x", "source": "s", "url": "https://x",
        "setting": "batch 1", "quote_checked": True, "confidence": "high"}


@pytest.mark.parametrize("change, words", [
    ({"source": None}, r"\.source = None: missing"),
    ({"setting": ""}, r"\.setting = '': missing"),
    ({"context": None}, r"\.context = None: missing"),
    ({"kind": "rate"}, r"\.kind = 'rate': one of decode, spec"),
    ({"layout": "other"}, r"\.layout = 'other'"),
    ({"figure": 0}, r"\.figure = 0: a number > 0"),
    ({"tp": 0}, r"\.tp = 0: an integer >= 1"),
    ({"batch": 0}, r"\.batch = 0: a number >= 1"),
    ({"gpu": "Z100"}, "Z100"),
])
def test_loader_refuses_an_entry_without_its_setting_or_source(tmp_path, change, words):
    with pytest.raises(ConfigError, match=words):
        pm.load(_write(tmp_path, [{**GOOD, **change}]))


def test_loader_refuses_a_repeated_id_and_an_unknown_model(tmp_path):
    with pytest.raises(ConfigError, match="id = 'a': unique"):
        pm.load(_write(tmp_path, [GOOD, GOOD]))
    with pytest.raises(ConfigError, match="nosuch"):
        pm.load(_write(tmp_path, [{**GOOD, "model": "nosuch"}]))
    assert pm.load(_write(tmp_path, [GOOD]))["measurements"][0]["id"] == "a"


def test_bad_file_is_one_line_exit_2(tmp_path, capsys):
    assert pm.main(["--file", str(_write(tmp_path, [{**GOOD, "url": None}]))]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "(a).url = None: missing" in err
    assert pm.main(["--file", str(tmp_path / "none.yaml")]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
