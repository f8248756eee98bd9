"""``specsched profile --analytic``: write a profile from a model, a GPU and a TP size.

``specsched profile --analytic --model NAME_OR_CONFIG --gpu NAME --tp N [--dtype bf16|fp8|mxfp4|nvfp4|int4]
[--window 6] [--drafter block|chain] [--draft-layers 1] [--draft-vocab N] [--host-ghz 2.1] [--name NAME] --out FILE``.
The options join the runtime's ``profile`` command when the runtime is installed (its
measuring path needs torch); otherwise ``profile`` offers the analytic path alone. Bad
input (unknown GPU or model, a config.json missing a key, a TP size that does not divide
the heads) raises :class:`ConfigError`: one line, exit 2, nothing written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml
from specsched.sim.cli_types import file_name, positive_int
from specsched.sim.errors import ConfigError

_ANALYTIC_DEST = "analytic"


class _FlowListDumper(yaml.SafeDumper):
    """Lists of numbers on one line, mappings as blocks."""


_FlowListDumper.add_representer(
    list, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v,
                                            flow_style=all(isinstance(x, (int, float)) for x in v)))



UNANCHORED_NOTE = (
    "MoE/MLA step times here are the roofline's with its default factors: dense models at batch 1 land within "
    "~5 % of public figures (docs/analytic-profiles.md, 'Against public measurements'), but no public figure here "
    "checks an MoE/MLA model's step, whose kernel count makes the per-kernel gap most of a small batch's step; "
    "before relying on absolute numbers, fit the factors to a real server's runs: specsched calibrate --from F ...")
"""Said when an analytic profile prices routed experts or MLA: how far its absolute step
times are checked (the public checks, docs/analytic-profiles.md; the MI355X DSpark case P1 is
2-6x slower than such a profile predicts, section 'Against the public measurements')."""

def dump_profile(d: dict[str, Any]) -> str:
    """The profile mapping as YAML text (grid rows on one line each)."""
    head = ("# Analytic roofline profile written by `specsched profile --analytic`: not a measurement.\n"
            "# Inputs are under `analytic`, sources under `provenance`.\n")
    return head + yaml.dump(d, Dumper=_FlowListDumper, sort_keys=False, width=120)


def write_analytic_profile(d: dict[str, Any], out: Path) -> None:
    """Validate ``d`` as a Profile, then write it atomically (nothing half-written)."""
    from specsched.sim.profile import Profile
    from specsched.sim.results import atomic_write_text

    Profile.model_validate(d)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, dump_profile(d))


def _check_buildable(d: dict[str, Any], model: str) -> None:
    """Refuse, naming ``model`` (the --model given), a profile its shapes price outside what a
    profile holds (a forward past 3600 s: ``num_hidden_layers`` 10**9), in one line: the
    profile's first out-of-range key and value, instead of pydantic's list of every cell.

    Raises:
        ConfigError: the built profile does not validate.
    """
    from pydantic import ValidationError
    from specsched.sim.profile import Profile

    try:
        Profile.model_validate(d)
    except ValidationError as e:
        first = e.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        raise ConfigError(model, f"profile {key}", first.get("input"),
                          f"{first['msg'].lower()}: the profile these shapes price is out of range "
                          "(check num_hidden_layers, hidden_size, intermediate_size, vocab_size)") from None


ATTENTION_KERNELS = {"paged": (True, 0), "paged-unsplit": (False, 0), "gather-unsplit": (False, 2)}
"""``--attention``: (split-KV, KV gather passes) of the decode attention (roofline
``attention_kv_bandwidth``, ``Efficiency.kv_gather_passes``). ``paged``: SGLang's default
kernels, reading the paged cache in place with split-KV. ``paged-unsplit``: the same without
split-KV (SGLang's ``--enable-deterministic-inference`` sets FA3's num_splits to 1).
``gather-unsplit``: the runtime's proxy (runtime/layers.py: the KV gathered into a dense copy,
then torch SDPA)."""


WEIGHT_DTYPES = ("bf16", "fp8", "mxfp4", "nvfp4", "int4")
"""``--dtype``: the weight formats the roofline prices (roofline.py ``FP4_BITS`` for the 4-bit ones)."""

DTYPE_ALIASES = {"bfloat16": "bf16", "modelopt_fp8": "fp8", "w8a8_fp8": "fp8", "modelopt_fp4": "nvfp4",
                 "awq": "int4", "awq_marlin": "int4"}
"""Other spellings ``--dtype`` takes (any case, as ``--gpu`` is read), each one SGLang 0.5.23 itself
takes for that format: ``bfloat16``, its ``--dtype`` (arg_groups/fields/model.py choices), and
the ``--quantization`` names of one weight format (arg_groups/choices.py ``QUANTIZATION_CHOICES``:
``modelopt_fp8``/``w8a8_fp8`` fp8, ``modelopt_fp4`` NVFP4, ``awq``/``awq_marlin`` 4-bit AWQ). Not
taken: ``float8``/``fp8_e4m3`` (no SGLang weight option spells fp8 so; fp8_e4m3 is a
``--kv-cache-dtype``), ``gptq`` (its checkpoints are 2, 3, 4 or 8 bits), ``float16``/``half``
(fp16 weights are not priced)."""


KV_CACHE_BYTES = {"auto": 2, "bf16": 2, "bfloat16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}
"""``--kv-cache-dtype``: SGLang's names and the element size each stores (``auto`` is what
SGLang picks for the model and GPU, :func:`models.auto_kv_cache_dtype`; model_executor/pool_configurator.py
``_compute_cell_size``)."""


def cmd_analytic_profile(args: argparse.Namespace) -> int:
    """Build the analytic profile the arguments describe, write it, print a summary."""
    from specsched.sim.analytic.gpus import gpu_table, load_gpu
    from specsched.sim.analytic.models import (
        load_model,
        shipped_key,
        shipped_models,
        stated_format_tag,
        stated_weight_format,
    )
    from specsched.sim.analytic.writer import build_profile

    for opt, what, shipped in (("model", "a config.json file or a shipped model", shipped_models),
                               ("gpu", "a shipped GPU", gpu_table)):
        if not getattr(args, opt, None):
            raise ConfigError("<command line>", f"--{opt}", "<missing>",
                              f"required with --analytic: {what}; shipped: {', '.join(shipped())}")
    if args.dtype is not None:
        given = args.dtype
        args.dtype = DTYPE_ALIASES.get(given.strip().lower(), given.strip().lower())
        if args.dtype not in WEIGHT_DTYPES:
            raise ConfigError("<command line>", "--dtype", given, f"allowed: {', '.join(WEIGHT_DTYPES)} (any case), "
                              f"or SGLang's spellings {', '.join(f'{k} ({v})' for k, v in DTYPE_ALIASES.items())}")
    from specsched.sim.analytic.roofline import Efficiency

    ghz = getattr(args, "host_ghz", None)
    if ghz is not None and not 0.5 <= ghz <= 10:
        raise ConfigError("<command line>", "--host-ghz", ghz, "the host CPU's single-core clock in GHz, 0.5..10")
    attention = getattr(args, "attention", None) or "paged"
    if attention not in ATTENTION_KERNELS:
        raise ConfigError("<command line>", "--attention", attention, f"allowed: {', '.join(ATTENTION_KERNELS)}")
    kv_dtype = getattr(args, "kv_cache_dtype", None) or "auto"
    if kv_dtype not in KV_CACHE_BYTES:
        raise ConfigError("<command line>", "--kv-cache-dtype", kv_dtype, f"allowed: {', '.join(KV_CACHE_BYTES)}")
    arch = load_model(args.model)
    if arch.name != args.model.lower() and shipped_key(args.model) == arch.name:
        stated = stated_weight_format(args.model)
        if stated in ("fp8", "int4") and args.dtype not in (None, stated):
            what = "fp8 weights" if stated == "fp8" else "4-bit integer weights (AWQ/GPTQ w4a16)"
            raise ConfigError("<command line>", "--dtype", args.dtype,
                              f"contradicts --model {args.model}, whose {stated_format_tag(args.model)} tag names a "
                              f"checkpoint of {what}, which SGLang serves as such (configs/model_config.py "
                              f"_verify_quantization keeps a checkpoint's format); allowed: {stated}, or no --dtype")
        print(_read_as_shipped_note(args.model, arch, stated if args.dtype is None else None, kv_dtype == "auto"))
    arch = _dtype_assumptions(arch, args.dtype)
    gpu = load_gpu(args.gpu)
    weights = args.dtype or arch.checkpoint_dtype
    why_not = gpu.weight_dtype_refusal(weights)
    if why_not:
        allowed = ", ".join(d for d in WEIGHT_DTYPES if gpu.weight_dtype_refusal(d) is None)
        if args.dtype:
            raise ConfigError("<command line>", "--dtype", args.dtype, f"not on {gpu.name}: {why_not}; "
                              f"allowed on {gpu.name}: {allowed}")
        raise ConfigError(arch.source, "quantization_config", weights, f"a {weights} checkpoint does not load on "
                          f"{gpu.name}: {why_not}; give --dtype (allowed on {gpu.name}: {allowed}) to price "
                          "another format")
    kv_chosen = ""
    if kv_dtype == "auto":
        from specsched.sim.analytic.models import auto_kv_cache_dtype

        kv_dtype, why = auto_kv_cache_dtype(arch, gpu.compute_capability, gpu.platform)
        kv_chosen = f"--kv-cache-dtype auto -> {kv_dtype}: {why}"
    if KV_CACHE_BYTES[kv_dtype] != arch.kv_cache_bytes:
        arch = arch.model_copy(update={"kv_cache_bytes": KV_CACHE_BYTES[kv_dtype], "assumptions": [
            *arch.assumptions, f"KV cache {kv_dtype} ({kv_chosen or '--kv-cache-dtype'}): {KV_CACHE_BYTES[kv_dtype]} "
            "byte(s) per element, read and written at that size; attention FLOPs at the bf16 rate"]})
    split, passes = ATTENTION_KERNELS[attention]
    if not split and gpu.sms is None:
        raise ConfigError("<command line>", "--attention", attention, f"needs the GPU's SM count, which the table "
                          f"lacks for {gpu.name}; allowed there: paged")
    over = {"host_ghz": ghz} if ghz is not None else {}
    if attention != "paged":
        over |= {"attention_split_kv": split, "kv_gather_passes": passes}
    eff = Efficiency(**over) if over else None
    drafter = args.drafter or ("chain" if getattr(args, "draft_model", None) else "block")
    if getattr(args, "draft_model", None) and drafter != "chain":
        # SGLang 0.5.23 runs a separate draft model as STANDALONE, an EAGLE-style chain of draft
        # steps (speculative/standalone_worker_v2.py StandaloneWorkerV2 extends EAGLEWorkerV2)
        raise ConfigError("<command line>", "--drafter", drafter,
                          "not with --draft-model: SGLang runs a draft model as STANDALONE, a chain drafter; "
                          "give --drafter chain or leave --drafter out")
    if getattr(args, "draft_model", None) and args.draft_layers is not None:   # it would be ignored
        raise ConfigError("<command line>", "--draft-layers", args.draft_layers,
                          "not with --draft-model: the draft model's layers are its own (its num_hidden_layers)")
    draft_arch = load_model(args.draft_model, "--draft-model") if getattr(args, "draft_model", None) else None
    from specsched.sim.analytic.writer import check_fp8_blocks, check_tp

    check_tp(arch, args.tp, args.model)
    arch = check_fp8_blocks(arch, args.tp, gpu.platform, args.model)   # its assumption printed below
    d = build_profile(arch, gpu, args.tp, args.dtype, window=args.window, drafter=drafter,
                      draft_layers=args.draft_layers or 1, eff=eff, name=args.name, model_ref=args.model,
                      draft_vocab=getattr(args, "draft_vocab", None),
                      draft_model=draft_arch)
    if draft_arch is not None and draft_arch.vocab_size != arch.vocab_size:
        # SGLang 0.5.23 stops at start: speculative/standalone_worker_v2.py
        # StandaloneWorkerV2._validate_vocab_compatibility raises on unequal vocab_size
        raise ConfigError("<command line>", "--draft-model", args.draft_model,
                          f"its vocab_size {draft_arch.vocab_size} differs from the target's {arch.vocab_size}: SGLang's "
                          "STANDALONE drafting needs the target's vocabulary and refuses to start "
                          "(speculative/standalone_worker_v2.py _validate_vocab_compatibility); allowed: a draft model "
                          f"of vocab_size {arch.vocab_size} (the same tokenizer)")
    if args.draft_layers is not None and args.draft_layers > arch.num_layers:
        print(f"warning: --draft-layers {args.draft_layers} is more than {arch.name}'s own {arch.num_layers} layers: "
              "the drafter is priced deeper than the model it drafts for (an EAGLE/MTP head has 1 layer, a "
              "DSpark/DFlash block drafter a few)", file=sys.stderr)
    if args.name is None:
        # the default name (and so the default --out file) tells the KV type and the drafter
        # apart: two profiles that differ only there no longer overwrite one another
        extra = ([f"kv-{kv_dtype.replace('_', '-')}"] if kv_dtype not in ("auto", "bf16", "bfloat16") else []) + (
            [f"draft-{draft_arch.name}"] if draft_arch is not None else [])
        if draft_arch is None and drafter == "chain":   # a draft model is a chain drafter anyway
            extra.append("chain")
        if args.window != 6:
            extra.append(f"w{args.window}")
        if args.draft_layers not in (None, 1):
            extra.append(f"dl{args.draft_layers}")
        if getattr(args, "draft_vocab", None):
            extra.append(f"dv{args.draft_vocab}")
        if extra:
            d["name"] = d["name"].removesuffix("-analytic") + "-" + "-".join(extra) + "-analytic"
    out = Path(args.out) if args.out else Path("profiles") / f"{d['name']}.yaml"
    if out.is_dir():
        raise ConfigError("<command line>", "--out", str(out), "is a directory; give a .yaml file path")
    from specsched.sim.profile import refuse_replacing_non_profile

    refuse_replacing_non_profile(out)
    _check_buildable(d, str(args.model))
    write_analytic_profile(d, out)
    hw = d["hardware"]
    dec = d["gpu"]["decode"]
    quiet = getattr(args, "quiet", False)   # -q: only the file written on stdout
    drafter_said = _drafter_text(d, given=args.drafter is not None, draft_model=draft_arch, moe=arch.is_moe)
    for line in [f"wrote {out}"] if quiet else _summary(d, hw, dec, kv_chosen, out, drafter_said):
        print(line)
    for a in arch.assumptions:   # each also in the profile's provenance.model
        # a default filled in for a key the config leaves out was said in the file only
        print(f"note: {a}" if "not modelled" in a else f"note: assumed: {a}", file=sys.stderr)
    if arch.num_experts or arch.kv_lora_rank:
        print(f"note: {UNANCHORED_NOTE}", file=sys.stderr)
    if args.tp > gpu.node_gpus:
        per_node, nodes = gpu.tp_nodes(args.tp)
        print(f"note: TP{args.tp} spans {nodes} nodes of {per_node} {gpu.name}: every all-reduce "
              f"is NCCL's across them (SGLang's custom all-reduce stays within a node), each GPU's share between nodes over "
              f"an assumed {gpu.nic_gbps:g} GB/s NIC (roofline.collective_s)", file=sys.stderr)
    elif args.tp > 1 and not gpu.custom_allreduce(args.tp):
        why = (f"more than two {gpu.name} without NVLink" if gpu.pcie_only and args.tp > 2
               else f"no PCIe peer-to-peer between {gpu.name} cards")
        print(f"note: TP{args.tp} on {gpu.name}: SGLang's custom all-reduce is off ({why}: custom_all_reduce_utils.py "
              f"can_use_custom_all_reduce_with_nvlink), so every all-reduce is NCCL's over {gpu.link_gbps:g} GB/s "
              f"PCIe at the assumed NCCL latency (roofline.collective_s)", file=sys.stderr)
    _warn_if_no_pool(d)
    return 0


def _read_as_shipped_note(model: str, arch: Any, stated: str | None, kv_auto: bool) -> str:
    """The note printed when ``--model`` is a Hugging Face id read as the shipped ``arch``
    (:func:`models.shipped_key`). ``stated``: the weight format its name states
    (:func:`models.stated_weight_format`) when ``--dtype`` is not given; the note says the
    weights are priced in it. An FP8 name says nothing of the checkpoint's KV cache: SGLang's
    ``auto`` is fp8_e4m3 only where its quantization config declares ``kv_cache_quant_algo``
    FP8 (mem_cache/kv_cache_dtype.py ``configure_kv_cache_dtype``), which a name does not tell,
    so ``kv_auto`` (``--kv-cache-dtype auto``) adds how to say it."""
    note = (f"note: --model {model} read as the shipped model {arch.name} (the same architecture; a tune, format or "
            "date tag does not change its shapes")
    if stated is None or stated != arch.checkpoint_dtype:
        return note + ", and --dtype sets the weights' format)"
    from specsched.sim.analytic.models import stated_format_tag

    tag = stated_format_tag(model) if stated == "int4" else stated.upper()   # an int4 name says AWQ or GPTQ
    note += (f"), its weights priced as {stated}, as its {tag} tag states (SGLang serves a checkpoint's "
             "weights in the format its quantization config names)")
    if stated == "int4" and tag.lower() == "gptq":
        note += ("; 4-bit assumed, GPTQ's usual width, as the name states none (a -GPTQ-Int8 checkpoint is 8-bit: "
                 "give its config.json to read it)")
    if stated == "fp8" and kv_auto:
        note += ("; whether the checkpoint also declares an FP8 KV cache (kv_cache_quant_algo) a name does not tell, "
                 "so --kv-cache-dtype auto keeps bf16: give its config.json, or --kv-cache-dtype fp8_e4m3")
    return note


def _drafter_text(d: dict[str, Any], given: bool, draft_model: Any = None, moe: bool = False) -> str:
    """The summary's line on the drafter the profile prices its speculative cycles with (a
    profile always prices one, used only when a scenario speculates): its kind, SGLang's
    algorithms of that kind, its size and the verify window the grids are timed at, and
    whether ``--drafter`` chose it or it is the default. A block drafter (DSpark/DFlash)
    drafts the window's tokens in one forward; a chain drafter (EAGLE/MTP/STANDALONE) one
    token per serial draft forward (speculative/eagle_worker_v2.py's draft loop). ``moe``: the
    target is an MoE model, whose assumed draft layers are MoE layers like its own
    (:func:`sim.analytic.roofline.draft_arch`: SGLang's DeepSeek MTP layer, DeepSeek-V4's DSpark
    stages)."""
    a = d["analytic"]
    kind = {"block": "block (DSpark/DFlash)", "chain": "chain (EAGLE/MTP/STANDALONE)"}.get(a["drafter"], a["drafter"])
    size = (f"the draft model {draft_model.name}" if draft_model is not None
            else f"{a['draft_layers']} target-shaped {'MoE' if moe else 'dense'} layer(s)")
    why = ("--draft-model" if draft_model is not None and not given else f"--drafter {a['drafter']}" if given
           else "the default; an EAGLE/MTP server: --drafter chain")
    return f"drafter: {kind}, {size}, verify window {a['window']} ({why})"


def _summary(d: dict[str, Any], hw: dict[str, Any], dec: dict[str, Any], kv_chosen: str, out: Path,
             drafter: str = "") -> list[str]:
    """The summary an analytic profile prints (stdout): name, weights and KV per rank, the
    drafter assumed (:func:`_drafter_text`), the KV dtype chosen for auto, decode times at
    context 1024, the file written."""
    swa = (f" in the full pool + {hw['swa_kv_cell_bytes'] / 1024:.1f} KiB in the SWA pool (window {hw['sliding_window']})"
           if "swa_kv_cell_bytes" in hw else "")
    drafter_kv = (f"; the drafter's KV {hw['draft_kv_cell_bytes'] / 1024:.1f} KiB more when speculating"
                  if hw.get("draft_kv_cell_bytes") else "")
    lines = [f"{d['name']}: {d['device']}",
             f"weights {hw['weight_bytes'] / 2**30:.2f} GiB per rank; KV {hw['kv_cell_bytes'] / 1024:.1f} KiB per token "
             f"per rank{swa}{drafter_kv}"]
    if drafter:
        lines.append(drafter)
    if kv_chosen:
        lines.append(kv_chosen)
    lines.append("decode ms at context 1024, batch 1/8/64/256: " + ", ".join(
        f"{dec['seconds'][dec['x'].index(b)][dec['context_len'].index(1024.0)] * 1e3:.3f}" for b in (1.0, 8.0, 64.0, 256.0)))
    lines.append(f"wrote {out}")
    return lines


def _dtype_assumptions(arch: Any, dtype: str | None) -> Any:
    """The model's assumptions as the chosen ``--dtype`` prices it.

    A checkpoint format the roofline does not price says "weights priced as bf16"; with
    ``--dtype`` given the weights are priced in that format instead, and the note says so.
    ``--dtype mxfp4`` on a model without routed experts quantizes nothing: SGLang 0.5.23's
    ``Mxfp4Config.get_quant_method`` (layers/quantization/mxfp4.py) gives every
    ``LinearBase`` the ``UnquantizedLinearMethod`` and only a ``FusedMoE`` the mxfp4 method,
    so every weight stays bf16; the note says that rather than a silent "mxfp4" profile
    priced as bf16.
    """
    if dtype is None:
        return arch
    notes = [a.replace("weights priced as bf16 (--dtype fp8 for an 8-bit estimate)",
                       f"weights priced as {dtype} (--dtype {dtype})") if "not modelled" in a else a
             for a in arch.assumptions]
    if dtype == "mxfp4" and not arch.num_experts:
        notes.append(f"--dtype mxfp4 is not modelled for {arch.name}'s weights: SGLang's mxfp4 quantizes routed "
                     "experts only (layers/quantization/mxfp4.py Mxfp4Config.get_quant_method) and it has none, "
                     "so every weight is priced as bf16 (--dtype nvfp4 or fp8 for its linears)")
    return arch.model_copy(update={"assumptions": notes})


def _warn_if_no_pool(d: dict[str, Any]) -> None:
    """A note on stderr when the weights leave no KV pool at SGLang's default settings for
    this GPU: SGLang would stop at start ("Not enough memory"), and ``run`` refuses such a
    profile (sim/limits.py). The profile itself is kept: its costs are still valid."""
    from specsched.sim.defaults import kv_pool_tokens, mem_fraction_static, memory_buckets
    from specsched.sim.hardware import Hardware

    hw = Hardware.model_validate(d["hardware"])
    chunk, graph = memory_buckets(hw.memory_mib, hw.tp_size)
    mfs = mem_fraction_static(hw, chunk, 16384, graph)
    if kv_pool_tokens(hw, mfs) == 0:
        from specsched.sim.defaults import loaded_weight_bytes

        # without speculative decoding no drafter is loaded (the figure run's refusal names)
        print(f"warning: {loaded_weight_bytes(hw) / 2**30:.1f} GiB of weights per rank"
              + (f" (the drafter's {hw.draft_weight_bytes / 2**30:.1f} GiB not counted)" if hw.draft_weight_bytes else "")
              + f" leave no KV pool on one {hw.gpu} at "
              f"mem_fraction_static {mfs}: SGLang would not start; use more TP ranks"
              + (" or --dtype fp8" if d["analytic"]["dtype"] == "bf16" else ""), file=sys.stderr)


def add_analytic_arguments(p: argparse.ArgumentParser, standalone: bool) -> None:
    """Add the analytic options to a ``profile`` parser (``standalone``: the runtime's
    measuring options are absent, so add the shared ones too)."""
    g = p.add_argument_group("analytic profile (no GPU needed)")
    g.add_argument("--analytic", action="store_true", dest=_ANALYTIC_DEST, default=standalone,
                   help="write a roofline profile from --model, --gpu and --tp instead of measuring")
    g.add_argument("--model", default=None, help="a shipped model name (e.g. llama-3.1-8b) or a config.json path")
    g.add_argument("--gpu", default=None, help="a shipped GPU: MI355X, MI325X, MI300X, H100, H800, H20, H200, B200, GB200, A100-80G, A100-40G, L40S, RTX5090")
    g.add_argument("--tp", type=int, default=1, help="tensor-parallel size (default 1)")
    g.add_argument("--dtype", default=None, help="bf16, fp8, mxfp4, nvfp4 or int4 (AWQ/GPTQ w4a16) weights and GEMMs, any case "
                   "(SGLang's bfloat16, modelopt_fp8, w8a8_fp8, modelopt_fp4, awq, awq_marlin too); the 4-bit formats "
                   "cover the modules SGLang quantizes with them (mxfp4: routed experts) (default: the checkpoint's, "
                   "or the one a Hugging Face id's tag states: -FP8 is fp8)")
    g.add_argument("--drafter", default=None, help="block (DSpark/DFlash) or chain (EAGLE/MTP/STANDALONE) (default block; "
                   "chain with --draft-model)")
    g.add_argument("--draft-layers", type=positive_int, default=None, help="decoder layers of the assumed drafter (default 1; "
                   "not with --draft-model, whose layers are its own)")
    g.add_argument("--draft-vocab", type=positive_int, default=None,
                   help="rows of the drafter's own LM head: an EAGLE-3 head's draft_vocab_size (32000 for the "
                        "Llama-3.1-8B heads) (default: the drafter uses the target's LM head, as EAGLE-2 and MTP do)")
    g.add_argument("--kv-cache-dtype", default=None,
                   help="KV cache element type, SGLang's --kv-cache-dtype: auto (what SGLang picks: fp8_e4m3 for a checkpoint "
                        "declaring FP8 KV, DeepSeek-V4, DeepSeek sparse attention on SM100+; else bf16), bf16, fp8_e4m3 or "
                        "fp8_e5m2 (1 byte: about twice the pool, half the KV read) (default auto)")
    g.add_argument("--draft-model", default=None,
                   help="a separate draft model (SGLang's STANDALONE drafter), a shipped name or a config.json: "
                        "priced as that whole model at the target's TP (default: --draft-layers target-shaped layers)")
    g.add_argument("--host-ghz", type=float, default=None,
                   help="the serving host's single-core CPU clock, GHz: scales the eager (no-graph) kernel issue "
                        "(default 2.1, the host it was measured on)")
    g.add_argument("--attention", default=None,
                   help="decode attention kernel: paged (SGLang's default: paged KV read in place, split-KV), "
                        "paged-unsplit (no split-KV: SGLang's deterministic inference), gather-unsplit (the "
                        "runtime's proxy: KV gathered into a dense copy, torch SDPA) (default paged)")
    if standalone:
        p.add_argument("--window", type=int, default=6, help="speculative window of the verify grid (default 6)")
        p.add_argument("--name", default=None, type=file_name, help="profile name (the default --out is profiles/<name>.yaml)")
        p.add_argument("--out", default=None, help="output YAML (default profiles/<name>.yaml)")


def attach(sub: Any) -> None:
    """Give ``specsched profile`` the analytic path: extend the runtime's parser when it is
    registered, else register an analytic-only ``profile``."""
    parser = sub.choices.get("profile") if hasattr(sub, "choices") else None
    if parser is None:
        parser = sub.add_parser("profile", help="write an analytic profile (the measuring path needs the runtime extra)",
                                description=__doc__.split("\n\n")[0])
        add_analytic_arguments(parser, standalone=True)
        from specsched.sim.errors import MissingDependency

        # the measuring path's options (--device, --preset, ...) say what to install
        # (specsched/cli.py main), rather than that they are unknown
        needs = MissingDependency("measuring a profile (`specsched profile --device ...`; --analytic needs no GPU)", "torch")
        parser.add_argument("--device", default=None, help="measure on this device: needs torch (the runtime extra)")

        def analytic_only(args: argparse.Namespace) -> int:
            if args.device is not None:
                raise needs
            return cmd_analytic_profile(args)

        parser.set_defaults(func=analytic_only, missing_dependency=needs)
        return
    add_analytic_arguments(parser, standalone=False)
    measure = parser.get_default("func")

    def dispatch(args: argparse.Namespace) -> int:
        if getattr(args, _ANALYTIC_DEST, False):
            return cmd_analytic_profile(args)
        return measure(args)

    parser.set_defaults(func=dispatch)
