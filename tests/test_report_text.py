"""The text report says n/a for figures that do not apply (NaN in the summary)."""

import math

from specsched.sim.report import format_report


def test_nan_figures_print_as_not_applicable():
    text = format_report({"scenario": "s", "arm": "a", "accept_length": math.nan,
                          "decode_throughput": float("nan"), "output_throughput": 12.5})
    lines = {ln.split(":")[0]: ln for ln in text.splitlines() if ":" in ln}
    assert lines["Accept length"].split()[-1] == "n/a"
    assert lines["Decode tok/s (steady batch)"].split()[-1] == "n/a"
    assert lines["Output token throughput (tok/s)"].split()[-1] == "12.50"
    assert "nan" not in text.lower().replace("n/a", "")
