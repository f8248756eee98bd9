"""GPU datasheet table for analytic profiles (``data/gpus.yaml``, each entry with its source)."""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field
from specsched.sim.errors import ConfigError


class GpuSpec(BaseModel):
    """One GPU's datasheet figures (per GPU).

    ``bf16_tflops``/``fp8_tflops``: dense tensor peak, TFLOP/s (``fp8_tflops`` None: no fp8
    tensor cores; fp8 weights then run at the bf16 rate). ``fp4_tflops``: dense FP4 tensor
    peak where the GPU multiplies 4-bit operands natively (None: 4-bit weights are dequantized
    to bf16 in the kernel and run at the bf16 rate, as on Hopper). ``hbm_tbps``: memory bandwidth,
    TB/s. ``memory_mib``: the total the driver reports, which SGLang's memory heuristics read.
    ``context_mib``: memory taken before SGLang measures the free memory its KV pool is sized from
    (an assumption the table states, not a datasheet figure; the profile's ``hardware.context_mib``).
    ``link_gbps``: TP interconnect bandwidth per direction, GB/s. ``mesh_links``: on a
    fully connected point-to-point mesh (AMD Infinity Fabric: one xGMI link to each of 7
    peers in an 8-GPU node) the number of links ``link_gbps`` sums; a TP group of ``tp``
    GPUs reaches its peers over ``tp - 1`` of them (:meth:`tp_link_bytes_per_s`). None: a
    switch (NVSwitch) gives every TP size the full figure. ``compute_capability``: CUDA
    SM version x 10 (90 Hopper, 100 datacenter Blackwell, 120 RTX Blackwell, 80 Ampere);
    None on ROCm. SGLang picks kernels by it (e.g. the all-reduce fusion on 90 and 100).
    ``sms``: streaming multiprocessors (compute units on ROCm): how many thread blocks of a
    one-block-per-SM kernel run at once (roofline ``attention_kv_bandwidth``). None: not in
    the table (a model that needs it says so). ``gfx_arch``: the ROCm ISA (``gfx950`` for
    MI350X/MI355X, ``gfx942`` for MI300X); SGLang gates kernels and one scheduling rule on it
    (``is_gfx95_supported``; :func:`sim.defaults.resolve_server`). None on CUDA.
    ``node_gpus``: GPUs one NVLink/xGMI domain joins (8 on an HGX board or an AMD 8-GPU
    platform, 72 in a GB200 NVL72 rack); a larger TP group spans nodes and reaches the others
    through the NICs. ``nic_gbps``: the scale-out (RDMA NIC) bandwidth per GPU per direction,
    GB/s, that such a group's traffic between nodes crosses. ``pcie_only``: the GPUs of a node
    reach each other over PCIe alone (no NVLink/xGMI); ``p2p``: the driver gives CUDA peer
    access between them over PCIe. Both decide whether SGLang's custom all-reduce runs
    (:meth:`custom_allreduce`). ``efficiency``: this GPU's own
    a priori values of efficiency factors (``sim.analytic.roofline.Efficiency`` field names),
    where a public measurement shows the part reaching a different share of its peak than the
    one default assumes (``efficiency_source`` says which); {}: the defaults.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    platform: Literal["cuda", "hip"]
    bf16_tflops: float = Field(gt=0)
    fp8_tflops: float | None = Field(None, gt=0)
    fp4_tflops: float | None = Field(None, gt=0)
    hbm_tbps: float = Field(gt=0)
    memory_gb: float = Field(gt=0)
    memory_mib: float = Field(gt=0)
    context_mib: float = Field(ge=0)
    link_gbps: float = Field(gt=0)
    mesh_links: int | None = Field(None, ge=1)
    compute_capability: int | None = Field(None, ge=1)
    sms: int | None = Field(None, ge=1)
    gfx_arch: str | None = None
    node_gpus: int = Field(8, ge=1)
    nic_gbps: float = Field(50.0, gt=0)
    pcie_only: bool = False
    p2p: bool = True
    source: str
    efficiency: dict[str, float] = Field(default_factory=dict)
    efficiency_source: str | None = None

    def peak_flops(self, dtype: str) -> float:
        """Dense matmul peak in FLOP/s for ``dtype`` (bf16, fp8, or a 4-bit format: nvfp4 at the FP4 peak where the
        GPU has one; mxfp4 at the FP8 peak on a CUDA GPU with one: SGLang 0.5.23's default
        ``flashinfer_mxfp4_moe_precision`` "default" quantizes the activations to mxfp8
        (layers/moe/moe_runner/flashinfer_trtllm.py, layers/quantization/mxfp4.py
        ``_prepare_flashinfer_mxfp8_activations``), and a Blackwell tensor core multiplies fp8 by fp4 at its
        FP8 rate (fp4 by fp4 only at the FP4 peak); on ROCm at the FP4 peak, AITER running mxfp4 experts as
        w4a4 (layers/moe/moe_runner/aiter.py: per_1x32 weights take per_1x32 activations); int4, AWQ/GPTQ
        w4a16, at the bf16 peak: its kernels dequantize)."""
        if dtype == "mxfp4" and self.fp4_tflops and self.platform == "cuda":
            return (self.fp8_tflops or self.bf16_tflops) * 1e12
        if dtype in ("mxfp4", "nvfp4") and self.fp4_tflops:
            return self.fp4_tflops * 1e12
        tf = self.fp8_tflops if dtype == "fp8" and self.fp8_tflops else self.bf16_tflops
        return tf * 1e12

    def weight_dtype_refusal(self, dtype: str) -> str | None:
        """Why SGLang 0.5.23 cannot serve weights of ``dtype`` on this GPU, or None.

        NVFP4 (NVIDIA ModelOpt FP4) has no linear layer off CUDA: ``ModelOptFp4Config.get_min_capability``
        is 80, but the FP4 GEMM backend ``auto`` resolves to ``flashinfer_cutlass`` on a GPU that is
        neither SM100 nor CUDA SM80-SM90 (layers/quantization/fp4_utils.py
        ``initialize_fp4_gemm_config``), and ``ModelOptFp4LinearMethod.process_weights_after_loading``
        (modelopt_quant.py) raises "native dense GEMM backends require SM100+" unless the GPU is
        Blackwell (CUDA SM10x-12x) or the backend is Marlin (CUDA SM80-SM90, weight-only). Every CUDA
        GPU of the table is SM80 or newer, so bf16, fp8 (weight-only below SM89), mxfp4 and int4
        (``Mxfp4Config``, ``AWQMarlinConfig``, ``GPTQMarlinConfig``: minimum capability 80) load on all."""
        if dtype == "nvfp4" and self.platform != "cuda":
            return ("SGLang 0.5.23 has no NVFP4 linear off CUDA (layers/quantization/fp4_utils.py "
                    "initialize_fp4_gemm_config picks flashinfer_cutlass there, and modelopt_quant.py "
                    "ModelOptFp4LinearMethod.process_weights_after_loading needs Blackwell or Marlin on CUDA "
                    "SM80-SM90); AMD's 4-bit format is mxfp4")
        return None

    def tp_link_bytes_per_s(self, tp: int) -> float:
        """Bytes/s per direction one GPU of a ``tp`` group can send to the others: the full
        ``link_gbps`` through a switch, ``tp - 1`` of ``mesh_links`` links on a mesh."""
        share = min(tp - 1, self.mesh_links) / self.mesh_links if self.mesh_links else 1.0
        return self.link_gbps * 1e9 * share

    def tp_nodes(self, tp: int) -> tuple[int, int]:
        """(GPUs of a ``tp`` group inside one node, nodes it spans): (tp, 1) within a node.
        A larger group takes the same number of GPUs on each node (SGLang's ``--nnodes``
        splits ``tp_size`` evenly), as many as fit: TP16 on 8-GPU nodes is 2 x 8, TP12 is 2 x 6."""
        inside = max(d for d in range(1, min(tp, self.node_gpus) + 1) if tp % d == 0)
        return inside, tp // inside

    def custom_allreduce(self, tp: int) -> bool:
        """Whether SGLang 0.5.23 runs a ``tp`` group's all-reduces with its custom all-reduce
        (one-shot/two-shot over peer memory) rather than NCCL. The custom all-reduce turns
        itself off (distributed/device_communicators/custom_all_reduce_utils.py
        ``can_use_custom_all_reduce_with_nvlink``, called from ``CustomAllreduce.__init__`` and
        custom_all_reduce_v2.py ``can_use_custom_all_reduce_v2``) at world size 1, when the
        group spans nodes, for more than two GPUs not fully connected by NVLink/xGMI ("not
        supported on more than two PCIe-only GPUs"), and where CUDA P2P is unavailable
        (``can_p2p``); ``CustomAllreduce.should_custom_ar`` also declines more than two
        PCIe-only GPUs. Then NCCL carries every all-reduce (distributed/parallel_state.py
        ``GroupCoordinator.all_reduce`` falls through to ``inplace_all_reduce``: PyNccl or
        torch.distributed)."""
        if tp <= 1 or self.tp_nodes(tp)[1] > 1:
            return False
        if self.pcie_only and tp > 2:
            return False
        return self.p2p or self.platform == "hip"   # on ROCm, P2P is taken as given between xGMI GPUs

    @property
    def memory_bytes(self) -> float:
        return self.memory_mib * 2**20


@cache
def gpu_table() -> dict[str, GpuSpec]:
    """All shipped GPUs by name."""
    path = Path(str(resources.files("specsched.sim.analytic") / "data" / "gpus.yaml"))
    raw = yaml.safe_load(path.read_text())
    return {k: GpuSpec(name=k, **v) for k, v in raw.items()}


def _norm(s: str) -> str:
    return "".join(ch for ch in s.lower() if ch.isalnum())


def load_gpu(name: str) -> GpuSpec:
    """A shipped GPU by name (case, spaces and dashes ignored: ``rtx-5090`` = ``RTX5090``).

    Raises:
        ConfigError: unknown name (lists the shipped ones).
    """
    spec = find_gpu(name)
    if spec is None:
        hint = suggest_gpu(name)
        raise ConfigError("<command line>", "--gpu", name, (f"unknown GPU; did you mean {hint}? " if hint else "unknown GPU; ")
                          + f"shipped: {', '.join(gpu_table())}")
    return spec


def suggest_gpu(name: str) -> str | None:
    """The shipped GPU an unknown ``name`` most likely means, for the refusal to name (never
    taken silently: an H100 PCIe or NVL, or a 40 GB A100, has other datasheet figures than
    the shipped part): the one named inside it (``NVIDIA H200``, ``H100-SXM``,
    ``A100-80GB``), else the ones whose names start with it (``A100``: A100-80G or A100-40G), else None."""
    spec = find_gpu_in_text(name)
    if spec is not None:
        return spec.name
    n = _norm(name)
    starts = [k for k in gpu_table() if n and _norm(k).startswith(n)]
    return " or ".join(starts) if starts else None


def find_gpu(name: str) -> GpuSpec | None:
    """A shipped GPU by name as :func:`load_gpu` matches it, or None."""
    return next((spec for k, spec in gpu_table().items() if _norm(k) == _norm(name)), None)


def find_gpu_in_text(text: str) -> GpuSpec | None:
    """The shipped GPU named in a free-text device description (longest name first), or None."""
    t = _norm(text)
    for k in sorted(gpu_table(), key=len, reverse=True):
        if _norm(k) in t:
            return gpu_table()[k]
    return None
