"""A block drafter (DSpark, DFlash) given no verify window gets SGLang 0.5.23's.

arg_groups/speculative_hook.py ``_handle_dspark``: gamma comes from
``--speculative-dspark-block-size`` or the draft checkpoint's config, else
``DEFAULT_DSPARK_GAMMA`` (7, speculative/dspark_components/dspark_config.py) with a warning,
and ``speculative_num_draft_tokens`` becomes gamma + 1. ``_handle_dflash``: the draft
config's block size, else 16. A scenario names no draft checkpoint, so the fallbacks apply.
Before, the field's default of 1 was refused as if the user had written it
("speculative_num_draft_tokens = 1: must be >= 2").
"""

from __future__ import annotations

import pytest
import yaml
from specsched.sim.analytic.cli import write_analytic_profile
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import load_model
from specsched.sim.analytic.writer import build_profile
from specsched.sim.server_args import ServerArgs

from specsched.cli import main


@pytest.mark.parametrize(("algo", "window"), [("dspark", 8), ("DSpark", 8), ("dflash", 16)])
def test_a_block_drafter_without_a_window_gets_sglangs_fallback(algo, window):
    s = ServerArgs.model_validate({"speculative_algorithm": algo})
    assert s.speculative_num_draft_tokens == window
    assert "speculative_num_draft_tokens" not in s.model_fields_set  # filled, not written: printed as a default


def test_a_stated_window_is_kept_and_a_stated_one_token_window_still_refused():
    assert ServerArgs.model_validate({"speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4}).speculative_num_draft_tokens == 4
    with pytest.raises(ValueError, match="speculative_num_draft_tokens"):
        ServerArgs.model_validate({"speculative_algorithm": "dspark", "speculative_num_draft_tokens": 1})
    assert ServerArgs.model_validate({}).speculative_num_draft_tokens == 1   # no speculation: untouched


def test_a_dspark_scenario_without_a_window_runs_and_says_which(tmp_path, capsys):
    prof = tmp_path / "p.yaml"
    write_analytic_profile(build_profile(load_model("llama-3.1-8b"), load_gpu("H100"), 1), prof)
    sc = {"name": "dspark-nowindow", "profile": str(prof),
          "server": {"speculative_algorithm": "dspark"}, "acceptance": {"mean_accept_length": 3.0},
          "workload": {"kind": "burst", "num_requests": 4, "input_len": {"kind": "fixed", "value": 256},
                       "output_len": {"kind": "fixed", "value": 32}}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(sc))
    rc = main(["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out")])
    out = capsys.readouterr()
    assert rc in (0, None), out.err
    assert "speculative_num_draft_tokens = 8" in out.out
    assert "DEFAULT_DSPARK_GAMMA" in out.out


@pytest.mark.parametrize(("algo", "window"), [("dspark", 8), ("dflash", 16)])
def test_the_fallback_window_holds_with_a_topk_given(algo, window):
    """SGLang's block fallbacks look only at speculative_num_draft_tokens (DFlash forces topk
    to 1 and keeps it): a scenario with ``speculative_eagle_topk: 1`` and no window was still
    refused as "speculative_num_draft_tokens = 1: must be >= 2"."""
    s = ServerArgs.model_validate({"speculative_algorithm": algo, "speculative_eagle_topk": 1})
    assert s.speculative_num_draft_tokens == window
    assert "speculative_num_draft_tokens" not in s.model_fields_set


def test_a_chain_drafter_with_steps_but_no_window_is_told_what_to_give():
    """EAGLE with speculative_num_steps / speculative_eagle_topk but no
    speculative_num_draft_tokens: the refusal says the window was left out and what to give
    (the window, or none of the three for SGLang's automatic choice); a block drafter's stated
    one-token window is refused without that hint."""
    with pytest.raises(ValueError, match="left out.*steps \\+ 1 at topk 1.*automatic choice"):
        ServerArgs.model_validate({"speculative_algorithm": "eagle", "speculative_num_steps": 3,
                                   "speculative_eagle_topk": 2})
    with pytest.raises(ValueError) as e:
        ServerArgs.model_validate({"speculative_algorithm": "dspark", "speculative_num_draft_tokens": 1})
    assert "left out" not in str(e.value)
