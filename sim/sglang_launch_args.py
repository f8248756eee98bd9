"""SGLang 0.5.23's launch arguments, and what the model does with each one it has no key for.

Users paste a server's launch arguments into a scenario's ``server`` block (or ``--set
server.KEY=V``). The block holds the arguments the scheduler model reads (:class:`sim.server_args.ServerArgs`);
every other SGLang argument falls in one of these kinds:

- :data:`SPELLINGS`: SGLang 0.5.23's names of settings the model has under its own server key
  (``max_total_tokens`` is ``max_total_num_tokens``, ``disable_overlap_schedule`` the inverse
  of ``enable_overlap_schedule``): read as those keys (:func:`as_server_keys`); given beside
  the key with another value, refused naming both.
- :data:`INERT_ARGS`: arguments that cannot change what the model predicts (TTFT, TPOT, ITL,
  throughput, the KV pool, scheduling): logging, metrics and tracing, hosts and ports, API
  keys and names, the model's path (the profile holds the model), startup-only weight-loading
  paths, seeds, watchdogs and timeouts, warmup. Accepted
  and left out before validation (:func:`drop_inert`), named in one ``note:`` line of the run
  (:func:`left_out_note`). Chosen conservatively: an argument that could change a step's time
  (a kernel, a buffer, an extra pass, TLS, a tensor dump, a canary sweep) is not inert.
- :data:`SGLANG_ARGS_ELSEWHERE`: arguments that change results and live elsewhere here (the
  profile's model, dtype, KV dtype, TP; another server key) or are not modelled (saying what
  they change): refused with that line, unless given at SGLang's default (below).
- any other name of :data:`LAUNCH_ARGS` (or :data:`ALIASES`): at SGLang 0.5.23's declared
  default (:data:`SGLANG_DEFAULTS`), which launches the same server as leaving it out, accepted
  and left out with a note (:func:`default_note`); at any other value refused as an SGLang
  launch argument the model has no setting for, which may change timing (:func:`launch_arg_line`).

Any other unknown key keeps the validator's "unknown key; did you mean" (a typo still fails).

Source: sglang 0.5.23 python/sglang/srt/server_args.py (``ServerArgs`` is assembled by
``collect_input_fields(_INPUT_NAMESPACES)`` from the msgspec structs of
srt/arg_groups/fields/*.py; ``add_cli_args`` registers the deprecated spellings) and each
field's help text there.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from specsched.sim.errors import FieldError

SGLANG_VERSION = "0.5.23"
"""The SGLang build whose ``ServerArgs`` fields :data:`LAUNCH_ARGS` lists."""

_REQUIRED = object()
"""The default of an argument SGLang declares none for (``model_path``: required)."""

LAUNCH_ARGS: dict[str, dict[str, Any]] = {
    "device.py Device": {
        "device": None, "base_gpu_id": 0, "gpu_id_step": 1, "random_seed": None, "mlx_enable_sampling": False,
        "watchdog_timeout": 300, "soft_watchdog_timeout": None, "sleep_on_idle": False, "use_ray": False,
        "custom_sigquit_handler": None, "numa_node": None, "gc_threshold": None
    },
    "disagg.py Disagg": {
        "decoupled_spec_bind_endpoint": None, "decoupled_spec_connect_endpoints": None, "decoupled_spec_rank": None,
        "decoupled_spec_role": "null", "disaggregation_mode": "null",
        "disaggregation_decode_allocation_policy": "early", "disaggregation_transfer_backend": "mooncake",
        "disaggregation_enable_kv_checksum": False, "disaggregation_bootstrap_port": 8998,
        "disaggregation_ib_device": None, "disaggregation_decode_enable_radix_cache": False,
        "disaggregation_decode_enable_offload_kvcache": False, "disaggregation_decode_retraction_backup": None,
        "num_reserved_decode_tokens": 512, "disaggregation_decode_extra_slots": None,
        "disaggregation_decode_polling_interval": 1, "enable_pd_role_switch": False, "optimistic_prefill_attempts": 0,
        "encoder_only": False, "language_only": False, "language_model_only": False,
        "encoder_transfer_backend": "auto", "encoder_urls": [], "encoder_bootstrap_port": 8997,
        "encoder_register_urls": [], "enable_adaptive_dispatch_to_encoder": False, "enable_pdmux": False,
        "pdmux_config_path": None, "sm_group_num": 8, "disaggregation_decode_host_receive_threshold": 1.0
    },
    "exec_.py ExecFeatures": {
        "enable_fp32_lm_head": False, "enable_tf32_matmul": None, "enable_memory_saver": False,
        "enable_weights_cpu_backup": False, "enable_draft_weights_cpu_backup": False,
        "enable_custom_logit_processor": False, "enable_watermark": False, "watermark_config": None,
        "watermark_key": None, "watermark_key_b": None, "watermark_context_window": 4,
        "watermark_mixing_probability": 0.5, "watermark_max_probability": 1.0, "watermark_default_enabled": False,
        "watermark_enforce_all": False, "enable_return_hidden_states": False, "return_hidden_states_mode": None,
        "enable_return_aux_hidden_states": False, "aux_hidden_state_capture": None,
        "return_aux_hidden_state_layer_ids": None, "enable_return_routed_experts": False,
        "enable_return_indexer_topk": False, "enable_encoder_swa_bounded_replay": False,
        "enable_decoder_swa_bounded_replay": None, "sampling_mask_max_tokens": 4096,
        "disable_outlines_disk_cache": False, "enable_mis": False
    },
    "exec_.py ExecKernel": {
        "attention_backend": None, "decode_attention_backend": None, "enable_lean_attention": None,
        "enable_nvidia_megakernel": False, "enable_amd_monokernel": False, "prefill_attention_backend": None,
        "prefill_kv_cache_dequant_dtype": "auto", "sampling_backend": None, "grammar_backend": None,
        "fp8_gemm_runner_backend": "auto", "fp4_gemm_runner_backend": "auto", "bf16_gemm_backend": "auto",
        "dsa_prefill_backend": None, "dsv4_prefill_backend": "auto", "dsa_triton_union": 0, "dsa_decode_backend": None,
        "dsv4_attn_backend": "auto", "dsa_paged_mqa_logits_backend": "auto", "dsa_topk_backend": "sgl-kernel",
        "disable_flashinfer_autotune": False, "flashinfer_autotune_skip_ops": None,
        "triton_attention_reduce_in_fp32": False, "triton_attention_num_kv_splits": 8,
        "triton_attention_split_tile_size": None, "flashinfer_mla_disable_ragged": False,
        "enable_fused_qk_norm_rope": None, "enable_precise_embedding_interpolation": False,
        "enable_deepseek_v4_fp4_indexer": False, "enable_dsa_fused_indexer": None
    },
    "exec_.py ExecMamba": {
        "mamba_backend": "triton", "mamba_ssm_dtype": None, "mamba_max_states_per_path": -1,
        "enable_mamba_cache_stochastic_rounding": False, "mamba_cache_philox_rounds": 0,
        "mamba_radix_cache_strategy": "auto", "uses_mamba_radix_cache": False, "mamba_track_interval": 256,
        "enable_int8_mamba_checkpoint": False, "int8_mamba_ckpt_size": None, "linear_attn_backend": "triton",
        "linear_attn_decode_backend": None, "linear_attn_prefill_backend": None, "linear_attn_verify_backend": None,
        "enable_linear_replayssm": False, "linear_replayssm_cache_len": 16, "enable_linear_replayssm_spec": False
    },
    "exec_.py ExecGraph": {
        "cuda_graph_config": None, "cuda_graph_backend_decode": None, "cuda_graph_backend_prefill": None,
        "cuda_graph_max_bs_decode": None, "cuda_graph_max_bs_prefill": None, "cuda_graph_max_seq_len_prefill": None,
        "cuda_graph_bs_decode": None, "cuda_graph_bs_prefill": None, "cuda_graph_prefill_max_context": None,
        "disable_prefill_cuda_graph": False, "disable_decode_cuda_graph": False, "disable_cuda_graph": False,
        "disable_cuda_graph_padding": False, "enable_profile_cuda_graph": False, "enable_cudagraph_gc": False,
        "debug_cuda_graph": False, "enable_torch_compile": False, "enable_torch_compile_debug_mode": False,
        "torch_compile_max_bs": 32
    },
    "exec_.py ExecComm": {
        "enable_layerwise_nvtx_marker": False, "enable_nccl_nvls": False, "enable_symm_mem": False,
        "disable_custom_all_reduce": False, "enable_mscclpp": False, "enable_torch_symm_mem": False,
        "enable_scattered_sconv": False, "pre_warm_nccl": False, "boundary_reduction": "auto",
        "enable_quant_communications": False, "enable_flashinfer_allreduce_fusion": False,
        "enforce_disable_flashinfer_allreduce_fusion": False, "flashinfer_allreduce_fusion_backend": None,
        "enable_aiter_allreduce_fusion": False, "disable_aiter_allreduce_fusion_in_prefill": False,
        "disable_aiter_allreduce_fusion_in_decode": False
    },
    "exec_.py ExecMoe": {
        "enable_fused_moe_sum_all_reduce": False, "moe_a2a_backend": "none", "enable_w4a4_mxfp4_megamoe": False,
        "deepep_v2_mode": "direct", "moe_runner_backend": "auto", "flashinfer_mxfp4_moe_precision": "default",
        "deepep_mode": "auto", "fuseep_mode": 2, "deepep_dispatcher_output_dtype": "auto",
        "flashinfer_a2a_dispatch_type": None, "ep_num_redundant_experts": 0, "ep_dispatch_algorithm": None,
        "init_expert_location": "trivial", "enable_eplb": False, "eplb_algorithm": "auto",
        "eplb_rebalance_num_iterations": 1000, "eplb_rebalance_layers_per_chunk": None,
        "eplb_min_rebalancing_utilization_threshold": 1.0, "expert_distribution_recorder_mode": None,
        "expert_distribution_recorder_buffer_size": None, "expert_balancedness_report_mode": "off",
        "deepep_config": None, "elastic_ep_backend": None, "enable_elastic_expert_backup": False,
        "mooncake_ib_device": None, "enable_waterfill": False, "ep_join_mode": None, "elastic_ep_scale_timeout": 600,
        "disable_flashinfer_cutlass_moe_fp4_allgather": False, "disable_shared_experts_fusion": False,
        "enforce_shared_experts_fusion": False, "enable_paged_experts": False, "paged_experts_num_resident": None,
        "kt_weight_path": None, "kt_method": "AMXINT4", "kt_cpuinfer": None, "kt_threadpool_count": 2,
        "kt_num_gpu_experts": None, "kt_max_deferred_experts_per_token": None
    },
    "exec_.py ExecOverlap": {
        "enable_two_batch_overlap": False, "enable_single_batch_overlap": False,
        "tbo_token_distribution_threshold": 0.48
    },
    "exec_.py ExecOffload": {
        "cpu_offload_gb": 0, "offload_group_size": -1, "offload_num_in_group": 1, "offload_prefetch_step": 1,
        "offload_mode": "cpu", "ple_offload_embedding": None, "ple_offload_backend": "pinned", "ple_offload_dir": None
    },
    "exec_.py ExecDllm": {
        "dllm_algorithm": None, "dllm_algorithm_config": None, "dllm_fdfo": True
    },
    "exec_.py ExecDeterministic": {
        "enable_deterministic_inference": False, "rl_on_policy_target": None
    },
    "lora.py Lora": {
        "enable_lora": None, "enable_lora_overlap_loading": None, "max_lora_rank": None, "lora_target_modules": None,
        "lora_paths": None, "max_loaded_loras": None, "max_loras_per_batch": 8, "lora_eviction_policy": "lru",
        "lora_backend": "csgmv", "max_lora_chunk_size": 16, "experts_shared_outer_loras": None,
        "lora_use_virtual_experts": False, "lora_strict_loading": False, "lora_drain_wait_threshold": 0.0
    },
    "memory.py Memory": {
        "radix_eviction_policy": "lru", "radix_eviction_policy_config": None, "disable_radix_cache": False,
        "enable_page_major_kv_layout": False, "enable_unified_memory": False, "enable_session_radix_cache": False,
        "radix_cache_backend": None, "enable_hierarchical_cache": False, "hicache_host_memory_mode": "cache",
        "hicache_ratio": None, "hicache_size": 0, "hicache_host_memory_fraction": 0.8,
        "hicache_write_policy": "write_through", "hicache_io_backend": "kernel", "hicache_mem_layout": "page_first",
        "hicache_storage_backend": None, "hicache_storage_prefetch_policy": "timeout",
        "hicache_storage_backend_extra_config": None, "hicache_storage_prefetch_retry_poll_interval": 8,
        "hicache_storage_prefetch_retry_max_attempts": 8, "enable_unified_cache_external_linker": False,
        "unified_cache_external_linker_backend": "mooncake", "unified_cache_external_linker_config": None,
        "enable_linker_mla_dedup": False, "enable_hisparse": False, "hisparse_config": None, "enable_lmcache": False,
        "lmcache_config_file": None, "enable_flexkv": False, "flexkv_config_file": None
    },
    "mm.py Mm": {
        "enable_multimodal": None, "mm_attention_backend": None, "enable_broadcast_mm_inputs_process": False,
        "enable_prefix_mm_cache": False, "mm_enable_dp_encoder": None, "mm_process_config": None,
        "mm_processor_worker_num": 0, "mm_io_worker_num": 0, "allowed_media_domains": [],
        "media_url_max_file_size_mb": 64, "mm_preprocess_cache_size_mb": None, "trust_mm_content_hashes": False,
        "limit_mm_data_per_request": None, "enable_mm_global_cache": False, "image_processor_backend": "auto",
        "mm_global_cache_backend": "mooncake", "disable_fast_image_processor": False, "mm_feature_transport": None
    },
    "model.py Model": {
        "model_path": _REQUIRED, "load_format": "auto", "model_loader_extra_config": "{}", "trust_remote_code": False,
        "context_length": None, "is_embedding": False, "revision": None, "model_impl": "auto",
        "model_config_parser": "auto", "json_model_override_args": "{}", "dtype": "auto", "quantization": None,
        "quantization_param_path": None, "kv_cache_dtype": "auto", "qsa_indexer_dtype": "auto", "modelopt_quant": None,
        "modelopt_checkpoint_restore_path": None, "modelopt_checkpoint_save_path": None, "modelopt_export_path": None,
        "quantize_and_serve": False, "rl_quant_profile": None, "startup_weight_load_mode": "serial",
        "custom_weight_loader": None, "weight_loader_disable_mmap": False, "weight_loader_prefetch_checkpoints": False,
        "weight_loader_prefetch_num_threads": 4, "weight_loader_drop_cache_after_load": False,
        "remote_instance_weight_loader_seed_instance_ip": None,
        "remote_instance_weight_loader_seed_instance_service_port": None,
        "remote_instance_weight_loader_send_weights_group_ports": None,
        "remote_instance_weight_loader_backend": "nccl",
        "remote_instance_weight_loader_start_seed_via_transfer_engine": False, "engine_info_bootstrap_port": 6789,
        "modelexpress_config": None, "download_dir": None, "model_checksum": None, "delete_ckpt_after_loading": False,
        "decrypted_config_file": None, "decrypted_draft_config_file": None,
        "checkpoint_engine_wait_weights_before_ready": False, "weight_cache_mode": "off", "weight_cache_socket": None,
        "weight_cache_timeout": 1800
    },
    "observability.py Observability": {
        "log_level": "info", "log_level_http": None, "log_requests": False, "log_requests_level": 2,
        "log_requests_format": "text", "log_requests_target": None, "uvicorn_access_log_exclude_prefixes": [],
        "crash_dump_folder": None, "show_time_cost": False, "enable_metrics": False, "smg_http_sidecar_port": None,
        "enable_mfu_metrics": False, "enable_metrics_for_all_schedulers": False, "load_snapshot_publish_interval": 15,
        "tokenizer_metrics_custom_labels_header": "x-custom-labels", "tokenizer_metrics_allowed_custom_labels": None,
        "extra_metric_labels": None, "bucket_time_to_first_token": None, "bucket_inter_token_latency": None,
        "bucket_e2e_request_latency": None, "prompt_tokens_buckets": None, "generation_tokens_buckets": None,
        "gc_warning_threshold_secs": 0.0, "decode_log_interval": 40, "enable_request_time_stats_logging": False,
        "kv_events_config": None, "load_publish_endpoint": None, "enable_forward_pass_metrics": False,
        "forward_pass_metrics_worker_id": "", "forward_pass_metrics_ipc_name": None, "enable_trace": False,
        "trace_modules": "request", "otlp_traces_endpoint": "localhost:4317", "otlp_service_name": None,
        "export_metrics_to_file": False, "export_metrics_to_file_dir": None, "stat_loggers": None, "kv_canary": "none",
        "kv_canary_real_data": "none", "kv_canary_sweep_interval": 0, "debug_tensor_dump_output_folder": None,
        "debug_tensor_dump_layers": None, "debug_tensor_dump_input_file": None, "forward_hooks": None,
        "msprobe_dump_config": None
    },
    "parallel.py Parallel": {
        "nccl_port": None, "dist_timeout": None, "dist_init_addr": None, "gated_launch_port": None, "nnodes": 1,
        "node_rank": 0, "tp_size": 1, "dcp_size": 1, "pp_size": 1, "pp_max_micro_batch_size": None,
        "pp_async_batch_depth": 0, "dp_size": 1, "attn_dp_size": 1, "load_balance_method": "auto", "attn_cp_size": 1,
        "moe_dp_size": 1, "dwdp_size": 1, "dcp_comm_backend": None, "dcp_replicate_q_proj": None,
        "enable_prefill_cp": False, "cp_strategy": None, "enable_cp_tp_group_sharing": False,
        "enable_dsa_cache_layer_split": False, "enable_cp_decode_attn_tp": False, "enable_kv_cache_sharding": False,
        "enable_dp_attention": False, "enable_dp_attention_local_control_broadcast": False, "enable_dp_lm_head": False,
        "enable_tp_lm_head_all_to_all": None, "enable_attn_tp_input_scattered": False,
        "enable_shared_experts_attn_tp": False, "shared_experts_tp_size": None, "enable_dense_mlp_attn_tp": False,
        "enable_layernorm_sp": False, "enable_megamoe_for_layernorm_sp": False, "disable_attn_tp_gather": False,
        "enable_p2p_check": False, "ep_size": 1, "moe_dense_tp_size": None, "ep_join_rank_offset": 0,
        "elastic_ep_initial_size": None, "max_ep_size": None
    },
    "schedule.py Schedule": {
        "mem_fraction_static": None, "max_running_requests": None, "max_queued_requests": None,
        "max_total_tokens": None, "chunked_prefill_size": None, "prefill_decode_interval": None,
        "prefill_decode_interval_min_bs": 0, "enable_dynamic_chunking": False, "max_prefill_tokens": 16384,
        "prefill_max_requests": None, "schedule_policy": "fcfs", "enable_priority_scheduling": False,
        "disable_priority_preemption": False, "default_priority_value": None, "abort_on_priority_when_disabled": False,
        "schedule_low_priority_values_first": False, "priority_scheduling_preemption_threshold": 10,
        "retraction_policy": "length", "schedule_conservativeness": 1.0, "page_size": None, "c128_page_size": 16,
        "swa_full_tokens_ratio": None, "swa_prefix_tails": None, "disable_hybrid_swa_memory": False,
        "prefill_only_disable_kv_cache": False, "disable_chunked_prefix_cache": False,
        "disable_overlap_schedule": False, "num_continuous_decode_steps": 1, "scheduler_recv_interval": 1,
        "enable_mixed_chunk": False, "max_mamba_cache_size": None, "mamba_full_memory_ratio": None,
        "enable_prefill_delayer": False, "prefill_delayer_max_delay_passes": 30,
        "prefill_delayer_token_usage_low_watermark": None, "prefill_delayer_forward_passes_buckets": None,
        "prefill_delayer_wait_seconds_buckets": None, "prefill_delayer_queue_min_ratio": None,
        "prefill_delayer_max_delay_ms": None, "min_free_slots_delay": None
    },
    "serving.py Serving": {
        "enable_response_store": False, "tokenizer_path": None, "tokenizer_mode": "auto",
        "tokenizer_backend": "huggingface", "tokenizer_worker_num": 1, "detokenizer_worker_num": 1,
        "skip_tokenizer_init": False, "host": "127.0.0.1", "port": 30000, "fastapi_root_path": "",
        "enable_http_worker_reuseport": False, "smg_grpc_mode": False, "grpc_mode": False, "grpc_port": None,
        "grpc_response_timeout_secs": 300, "grpc_worker_threads": None, "sidecar": None, "sidecar_args": None,
        "skip_server_warmup": False, "warmups": None, "enable_http2": False, "http2_max_concurrent_streams": 200,
        "http2_initial_connection_window_size": 1048576, "ssl_keyfile": None, "ssl_certfile": None,
        "ssl_ca_certs": None, "ssl_keyfile_password": None, "enable_ssl_refresh": False, "api_key": None,
        "admin_api_key": None, "served_model_name": None, "weight_version": "default", "chat_template": None,
        "trust_request_chat_template": False, "hf_chat_template_name": None, "completion_template": None,
        "file_storage_path": None, "enable_cache_report": False, "return_input_ids": False, "return_output_ids": False,
        "reasoning_parser": None, "default_chat_template_kwargs": None, "strip_thinking_cache": False,
        "enable_strict_thinking": False, "tool_call_parser": None, "tool_server": None, "sampling_defaults": "model",
        "asr_max_buffer_seconds": 60, "asr_max_concurrent_sessions": 32, "preferred_sampling_params": None,
        "allow_auto_truncate": False, "stream_interval": 1, "batch_notify_size": 16,
        "stream_response_default_include_usage": False, "incremental_streaming_output": False,
        "enable_streaming_session": False, "constrained_json_whitespace_pattern": None,
        "constrained_json_disable_any_whitespace": False, "constrained_json_max_whitespace_cnt": None,
        "enable_dynamic_batch_tokenizer": False, "dynamic_batch_tokenizer_batch_size": 32,
        "dynamic_batch_tokenizer_batch_timeout": 0.002, "enable_tokenizer_batch_encode": False,
        "disable_tokenizer_batch_decode": False
    },
    "spec.py Spec": {
        "speculative_algorithm": None, "uno_lora_path": None, "speculative_draft_model_path": None,
        "speculative_boundary_reduction": "rs+rsv", "speculative_draft_model_revision": None,
        "speculative_draft_load_format": None, "speculative_num_steps": None, "speculative_eagle_topk": None,
        "speculative_num_draft_tokens": None, "speculative_dflash_block_size": None,
        "speculative_domino_candidate_pool_size": 2048, "speculative_dspark_block_size": None,
        "speculative_dspark_sps_table_path": None, "speculative_dspark_confidence_sts_path": None,
        "speculative_dspark_align_verify_tokens_to_graph_tier": False, "speculative_accept_threshold_single": 1.0,
        "speculative_accept_threshold_acc": 1.0, "speculative_use_rejection_sampling": False,
        "speculative_use_block_verification": False, "speculative_token_map": None,
        "speculative_attention_mode": "prefill", "speculative_draft_attention_backend": None,
        "speculative_dsa_topk_backend": "sgl-kernel", "speculative_draft_kv_cache_dtype": None,
        "speculative_draft_window_size": None, "speculative_draft_sink_size": None,
        "speculative_moe_runner_backend": None, "speculative_moe_a2a_backend": None,
        "speculative_enable_w4a4_mxfp4_megamoe": None, "speculative_draft_model_quantization": None,
        "enable_multi_layer_eagle": False, "speculative_adaptive": False, "speculative_adaptive_config": None,
        "spec_trace_dir": None, "speculative_ngram_min_bfs_breadth": 1, "speculative_ngram_max_bfs_breadth": 10,
        "speculative_ngram_match_type": "BFS", "speculative_ngram_max_trie_depth": 18,
        "speculative_ngram_capacity": 10000000, "speculative_ngram_external_corpus_path": None,
        "speculative_ngram_external_sam_budget": 0, "speculative_ngram_external_corpus_max_tokens": 10000000
    },
}
"""Every ``ServerArgs`` field of SGLang 0.5.23 with its declared default, by the file and
namespace struct of srt/arg_groups/fields/ that declares it (``_INPUT_NAMESPACES`` of
server_args.py): the ``= value`` of each field there (``msgspec.field(default_factory=list)``:
``[]``). That default is what argparse fills for an argument left off the command line
(server_args.py ``add_cli_args``, ``from_cli_args``), so an argument given at it launches the
same server as one left out; a default resolved later by platform or model (``sampling_backend``
None: flashinfer where the platform has it, arg_groups/overrides.py ``_sampling_backend_default``)
is declared in that unresolved form (None, "auto")."""

ALIASES: dict[str, str] = {
    # srt/arg_groups/fields/*.py ``Arg(aliases=[...])``, as a YAML key (dashes to underscores)
    "context_bucket": "cuda_graph_prefill_max_context", "enable_hicache": "enable_hierarchical_cache",
    "hierarchical_sparse_attention_extra_config": "hisparse_config", "model": "model_path",
    "grpc_http_sidecar_port": "smg_http_sidecar_port", "nccl_init_addr": "dist_init_addr",
    "tensor_parallel_size": "tp_size", "decode_context_parallel_size": "dcp_size",
    "pipeline_parallel_size": "pp_size", "data_parallel_size": "dp_size",
    "attention_data_parallel_size": "attn_dp_size", "attention_context_parallel_size": "attn_cp_size",
    "moe_data_parallel_size": "moe_dp_size", "expert_parallel_size": "ep_size", "ep": "ep_size",
    "speculative_draft_model": "speculative_draft_model_path",
    # server_args.py add_cli_args: deprecated ``--monokernel-backend amd``
    "monokernel_backend": "enable_amd_monokernel",
}
"""Other spellings SGLang 0.5.23's command line takes for a field -> the field."""

FIELDS: frozenset[str] = frozenset(n for names in LAUNCH_ARGS.values() for n in names)
"""SGLang 0.5.23's ``ServerArgs`` field names."""

SGLANG_DEFAULTS: dict[str, Any] = {n: d for table in LAUNCH_ARGS.values() for n, d in table.items()}
"""Each field's declared default (:data:`LAUNCH_ARGS`)."""

ALL_NAMES: frozenset[str] = FIELDS | frozenset(ALIASES)
"""Every name an SGLang 0.5.23 launch argument goes by here (fields and their other spellings)."""

SERVER_STATE: tuple[str, ...] = ("internal_states", "launch_command", "version", "frontend", "startup_time",
                                 "kv_events", "max_req_input_len")
"""/server_info keys that are no launch argument: the server's state and identity (0.5.23
http_server.py ``server_info``: ``internal_states``, ``startup_time``, ``version``,
``frontend``; utils/common.py ``build_server_info``: ``launch_command``, ``kv_events`` and the
scheduler's info such as ``max_req_input_len``). A pasted /server_info holds them; they are
left out with the inert arguments (:func:`_left_out`, named in :func:`left_out_note`)."""

INERT: dict[str, tuple[str, ...]] = {
    "logging": (
        "log_level", "log_level_http", "log_requests", "log_requests_level", "log_requests_format",
        "log_requests_target", "uvicorn_access_log_exclude_prefixes", "crash_dump_folder",
        "decode_log_interval", "enable_request_time_stats_logging", "gc_warning_threshold_secs",
    ),
    "metrics and tracing": (
        "enable_metrics", "enable_mfu_metrics", "enable_metrics_for_all_schedulers", "smg_http_sidecar_port",
        "tokenizer_metrics_custom_labels_header", "tokenizer_metrics_allowed_custom_labels", "extra_metric_labels",
        "bucket_time_to_first_token", "bucket_inter_token_latency", "bucket_e2e_request_latency",
        "prompt_tokens_buckets", "generation_tokens_buckets", "prefill_delayer_forward_passes_buckets",
        "prefill_delayer_wait_seconds_buckets", "load_snapshot_publish_interval",
        "load_publish_endpoint", "forward_pass_metrics_worker_id",
        "forward_pass_metrics_ipc_name", "trace_modules", "otlp_traces_endpoint",
        "otlp_service_name", "export_metrics_to_file", "export_metrics_to_file_dir", "stat_loggers",
    ),
    "hosts and ports": (
        "host", "port", "fastapi_root_path", "nccl_port", "dist_init_addr", "gated_launch_port",
        "disaggregation_bootstrap_port", "encoder_bootstrap_port", "engine_info_bootstrap_port",
        "remote_instance_weight_loader_seed_instance_ip", "remote_instance_weight_loader_seed_instance_service_port",
        "remote_instance_weight_loader_send_weights_group_ports",
    ),
    "API keys and names": (
        "api_key", "admin_api_key", "served_model_name", "weight_version",
        "enable_cache_report",
    ),
    "the model's path (the model is the profile's)": ("model_path",),
    "the tokenizer's path (prompt lengths are the workload's)": ("tokenizer_path",),
    "weight loading at startup, paths": (
        "trust_remote_code", "download_dir", "model_checksum", "delete_ckpt_after_loading",
        "startup_weight_load_mode", "weight_loader_disable_mmap", "weight_loader_prefetch_checkpoints",
        "weight_loader_prefetch_num_threads", "weight_loader_drop_cache_after_load",
        "checkpoint_engine_wait_weights_before_ready", "modelopt_checkpoint_save_path", "modelopt_export_path",
        "file_storage_path", "enable_p2p_check",
    ),
    "seeds, watchdogs and timeouts": (
        "random_seed", "watchdog_timeout", "soft_watchdog_timeout", "dist_timeout", "custom_sigquit_handler",
        "grpc_response_timeout_secs",
    ),
    "warmup": ("skip_server_warmup", "warmups"),
}
"""SGLang 0.5.23 arguments that cannot change what the model predicts, by what they set:
none times a step, sizes the KV pool, orders the queue or changes what a client receives
(a port, a log line, a metric, a startup-only loading option). Not here on purpose, though
close: ``sleep_on_idle`` (a sleeping scheduler wakes later), ``gc_threshold`` and
``numa_node`` (host speed), the ``ssl_*`` options (TLS costs per request),
``debug_tensor_dump_*``, ``kv_canary*`` and ``forward_hooks`` (work in every forward),
``tokenizer_mode``/``tokenizer_path``/``chat_template`` (tokens or tokenization time),
``pre_warm_nccl`` (the first requests' TTFT), ``default_priority_value`` (queue order),
``preferred_sampling_params`` (a request's defaults, its output length among them),
``tokenizer_worker_num`` / ``detokenizer_worker_num`` (the tokenizer's time per prompt token is
modelled: the host's ingest terms), ``show_time_cost`` (model_executor/model_runner.py turns on
utils/common.py's timers, which call ``torch.cuda.synchronize()``), ``enable_forward_pass_metrics``,
``enable_trace`` and ``kv_events_config`` (host work in every step). Left out although they do a little host work each step, which the
profile's host terms do not hold: ``enable_metrics`` / ``enable_mfu_metrics`` (the scheduler's
per-iteration stats, scheduler_components/metrics_reporter.py) and ``decode_log_interval`` (a log
line every that many decode steps, 40 by default): servers run with them as a rule, and refusing
them would refuse most pasted launch commands; a server logging every step (1) is not modelled."""

INERT_ARGS: frozenset[str] = frozenset(n for names in INERT.values() for n in names) | frozenset(
    a for a, field in ALIASES.items() if any(field in names for names in INERT.values()))
"""Every inert name (:data:`INERT`, and the other spellings of those fields)."""

INERT_TYPES: dict[str, tuple[str, ...]] = {
    "bool": (
        "checkpoint_engine_wait_weights_before_ready", "delete_ckpt_after_loading", "enable_cache_report",
        "enable_metrics", "enable_metrics_for_all_schedulers", "enable_mfu_metrics", "enable_p2p_check",
        "enable_request_time_stats_logging", "export_metrics_to_file", "log_requests", "skip_server_warmup",
        "trust_remote_code", "weight_loader_disable_mmap", "weight_loader_drop_cache_after_load",
        "weight_loader_prefetch_checkpoints",
    ),
    "int": (
        "decode_log_interval", "disaggregation_bootstrap_port", "encoder_bootstrap_port", "engine_info_bootstrap_port",
        "grpc_response_timeout_secs", "load_snapshot_publish_interval", "port", "weight_loader_prefetch_num_threads",
    ),
    "float": ("gc_warning_threshold_secs", "watchdog_timeout"),
    "str": (
        "fastapi_root_path", "forward_pass_metrics_worker_id", "host", "log_level", "model_path", "otlp_traces_endpoint",
        "tokenizer_metrics_custom_labels_header", "trace_modules", "weight_version",
    ),
    "Optional[int]": (
        "dist_timeout", "gated_launch_port", "nccl_port", "random_seed",
        "remote_instance_weight_loader_seed_instance_service_port", "smg_http_sidecar_port",
    ),
    "Optional[float]": ("soft_watchdog_timeout",),
    "Optional[str]": (
        "admin_api_key", "api_key", "crash_dump_folder", "dist_init_addr", "download_dir", "export_metrics_to_file_dir",
        "file_storage_path", "forward_pass_metrics_ipc_name", "load_publish_endpoint", "log_level_http",
        "model_checksum", "modelopt_checkpoint_save_path", "modelopt_export_path", "otlp_service_name",
        "remote_instance_weight_loader_seed_instance_ip", "served_model_name", "tokenizer_path", "warmups",
    ),
    "List[str]": ("uvicorn_access_log_exclude_prefixes",),
    "Optional[List[str]]": (
        "generation_tokens_buckets", "log_requests_target", "prompt_tokens_buckets",
        "tokenizer_metrics_allowed_custom_labels",
    ),
    "Optional[List[int]]": ("remote_instance_weight_loader_send_weights_group_ports",),
    "Optional[List[float]]": (
        "bucket_e2e_request_latency", "bucket_inter_token_latency", "bucket_time_to_first_token",
        "prefill_delayer_forward_passes_buckets", "prefill_delayer_wait_seconds_buckets",
    ),
    "Optional[Dict[str, str]]": ("extra_metric_labels",),
    "Literal[0, 1, 2, 3]": ("log_requests_level",),
    "Literal['text', 'json']": ("log_requests_format",),
    "Literal['serial', 'overlap']": ("startup_weight_load_mode",),
}
"""The type SGLang 0.5.23's ``ServerArgs`` declares for each inert field (arg_groups/fields/*.py:
the annotation of ``A[type, ...]``; an ``Arg(choices=[...])`` written as ``Literal``), by type.
``custom_sigquit_handler`` and ``stat_loggers`` are not here: they have no command-line form
(a callable, a mapping of classes), so any value is taken."""

_INERT_TYPE: dict[str, str] = {n: t for t, names in INERT_TYPES.items() for n in names}


def _fits(spec: str, v: Any) -> bool:
    """Whether the YAML value ``v`` is of the SGLang type ``spec`` (:data:`INERT_TYPES`' grammar)."""
    if spec.startswith("Optional["):
        return v is None or _fits(spec[9:-1], v)
    if spec.startswith("List["):
        return isinstance(v, list) and all(_fits(spec[5:-1], x) for x in v)
    if spec.startswith("Dict["):
        key, val = (t.strip() for t in spec[5:-1].split(",", 1))
        return isinstance(v, Mapping) and all(_fits(key, k) and _fits(val, x) for k, x in v.items())
    if spec.startswith("Literal["):
        return any(_same_kind(v, c) for c in ast.literal_eval(f"({spec[8:-1]},)"))
    return {"bool": lambda: isinstance(v, bool), "int": lambda: _is_int(v), "str": lambda: isinstance(v, str),
            "float": lambda: _is_int(v) or isinstance(v, float)}[spec]()


def _describe(spec: str) -> str:
    """``spec`` in words (the refusal's "allowed")."""
    if spec.startswith("Optional["):
        return f"{_describe(spec[9:-1])} or null"
    if spec.startswith("List["):
        return f"a list of {_describe(spec[5:-1]).removeprefix('a ').removeprefix('an ')}s"
    if spec.startswith("Dict["):
        return "a mapping of strings to strings"
    if spec.startswith("Literal["):
        return "one of " + ", ".join(_yaml(c) for c in ast.literal_eval(f"({spec[8:-1]},)"))
    return {"bool": "true or false", "int": "an integer", "float": "a number", "str": "a string"}[spec]


def inert_value_error(name: str, value: Any) -> str | None:
    """Why ``value`` is not one SGLang 0.5.23 takes for the inert argument ``name`` (one line:
    its declared type, :data:`INERT_TYPES`); None when it is, or is null (unset), or the type is not known. Left out
    though it is, a ``log_level: 7`` or ``enable_metrics: maybe`` is a typo the server would refuse."""
    spec = _INERT_TYPE.get(ALIASES.get(name, name))
    # null: unset, as SGLang's /server_info reports a list argument given no values
    if spec is None or value is None or _fits(spec, value):
        return None
    return (f"an SGLang {SGLANG_VERSION} launch argument with no effect on the prediction (left out), but "
            f"ServerArgs declares it {spec}: allowed: {_describe(spec)}")

_KV_DTYPE = ("the KV cache dtype is the profile's (`specsched profile --analytic --kv-cache-dtype "
             "auto|bf16|fp8_e4m3|fp8_e5m2`: bytes per token, so the pool and the KV read)")
_KERNELS = "it changes kernel times, which the profile holds: profile the server as it runs"

_LIVES_ELSEWHERE: dict[str, str] = {
    "dtype": "the dtype is the profile's (`specsched profile --analytic --dtype bf16|fp8`)",
    "quantization": "the weights' format is the profile's (`specsched profile --analytic --dtype "
                    "bf16|fp8|mxfp4|nvfp4|int4`)",
    "kv_cache_dtype": _KV_DTYPE,
    "speculative_draft_model_path": "the drafter's cost is the profile's (`specsched profile --analytic "
                                    "--draft-model NAME_OR_CONFIG`, or --drafter and --draft-layers)",
    "cuda_graph_backend_decode": "disabled: write server.disable_decode_cuda_graph: true; another backend "
                                 "changes kernel times, which the profile holds",
    "cuda_graph_backend_prefill": "disabled: write server.disable_prefill_cuda_graph: true; another backend "
                                  "changes kernel times, which the profile holds",
    "cuda_graph_config": "write its parts as server keys: cuda_graph_max_bs, cuda_graph_bs, "
                         "cuda_graph_max_bs_prefill, cuda_graph_bs_prefill, disable_decode_cuda_graph, "
                         "disable_prefill_cuda_graph",
    "min_free_slots_delay": "write server.admission_delay: min_free_slots and server.min_free_slots: N",
    "disable_hybrid_swa_memory": "write server.sliding_window_size: null (one pool of every layer)",
    "speculative_dflash_block_size": "write server.speculative_num_draft_tokens (the DFlash block size)",
    "speculative_dspark_block_size": "write server.speculative_num_draft_tokens: gamma + 1 (DSpark's block "
                                     "size is gamma)",
    "enable_torch_compile": _KERNELS,
    "attention_backend": _KERNELS,
    "decode_attention_backend": _KERNELS,
    "prefill_attention_backend": _KERNELS,
    "enable_deterministic_inference": _KERNELS + " (`specsched profile --analytic --attention paged-unsplit` "
                                                 "prices its unsplit decode attention)",
}
"""Arguments whose setting lives elsewhere here (the profile, another server key), whatever
their value but SGLang's default (:func:`at_default`)."""

ROLES = ("prefill", "decode")
"""A disaggregation layout's roles (sim/disagg_config.py)."""

_ACCEPT_LENGTH = ("it changes the accept length; state the accept length measured with it "
                  "(acceptance.mean_accept_length, per_position_rates or histogram)")
_ROUTED = ("auto", "round_robin")

@dataclass(frozen=True)
class Unmodelled:
    """An SGLang argument that changes results and that the model does not have, with the
    value(s) it does run: those are accepted (left out, with a note), any other refused.

    default: SGLang 0.5.23's default (arg_groups/fields/*.py), the value the model runs.
    refusal: what another value changes (the refusal's text; "; allowed: ..." follows).
    measured: for ``scenario from-bench``, what a server_info value other than ``default``
        changed in the measured run (``{v}``: that value); None: not said there.
    accepts: other values the model runs too, given the server block (a mapping as read);
        None: ``default`` only.
    allowed: the refusal's "allowed" text; None: ``default``'s YAML spelling.
    """

    default: Any
    refusal: str
    measured: str | None = None
    accepts: Callable[[Any, Mapping[str, Any]], bool] | None = None
    allowed: str | None = None

    def runs(self, value: Any, server: Mapping[str, Any]) -> bool:
        """Whether ``value`` is what the model runs (for ``server``, the block it is in)."""
        if same_setting(value, self.default):
            return True
        return self.accepts is not None and self.accepts(value, server)

    def allowed_text(self) -> str:
        return self.allowed or f"{_yaml(self.default)} (SGLang's default, what the model runs)"


def _number(v: Any) -> float | None:
    """``v`` as a number when it is one (a bool is not) or a string that spells one, else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            return None
    return None


def same_setting(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same setting of one server argument: the one rule every
    comparison of server arguments uses (``validate --measured F:L --scenario S`` naming what the
    line ran otherwise, ``scenario from-bench --template`` naming what the template replaced,
    ``calibrate --from`` comparing the server log's launch with the runs' server_info, an
    unmodelled argument's default). An enum is its value; a bool is only a bool (``True`` is not
    ``1``); None is only None; numbers are compared by value, within 1e-9 relative (``8192`` is
    ``8192.0``), and a string that spells a number is that number (``"1"`` is ``1``: a
    ``--metadata`` label, a log's text); strings exactly, or regardless of case where one side is
    an enum (SGLang's ``"EAGLE3"``, the scenario's ``eagle3``); lists and tuples element by
    element; mappings key by key."""
    import enum
    import math

    enums = isinstance(a, enum.Enum) or isinstance(b, enum.Enum)
    if enums:
        a, b = (v.value if isinstance(v, enum.Enum) else v for v in (a, b))
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return a is b or (isinstance(a, bool) and isinstance(b, bool) and a == b)
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        return (isinstance(a, Mapping) and isinstance(b, Mapping) and a.keys() == b.keys()
                and all(same_setting(a[k], b[k]) for k in a))
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b)
                and all(same_setting(x, y) for x, y in zip(a, b, strict=True)))
    if isinstance(a, str) and isinstance(b, str):
        return a == b or (enums and a.casefold() == b.casefold())
    x, y = _number(a), _number(b)
    if x is not None and y is not None:
        return x == y or (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-9)
    return a == b


def _same_kind(a: Any, b: Any) -> bool:
    """``a`` is the literal ``b`` and of its kind: the type check of a ``Literal[...]`` value
    (``True`` is not ``1``, ``"1"`` is not ``1``), not a comparison of settings (:func:`same_setting`)."""
    return a == b and isinstance(a, bool) == isinstance(b, bool) and isinstance(a, str) == isinstance(b, str) \
        and (a is None) == (b is None)


def _yaml(v: Any) -> str:
    return "null" if v is None else str(v).lower() if isinstance(v, bool) else str(v)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


UNMODELLED: dict[str, Unmodelled] = {
    # arg_groups/fields/schedule.py: "Run multiple continuous decoding steps ... may also
    # increase time-to-first-token latency"; 0.5.23 declares the argument and nothing in
    # srt/ reads it (grep), so on such a server it changed nothing: the note says both
    "num_continuous_decode_steps": Unmodelled(
        1, "not modelled (sglang 0.5.23 declares it and never reads it)",
        "a server that runs them (older builds; 0.5.23 declares the argument but never reads it) ran {v} decode "
        "steps between scheduling passes, so a new request waited for them: the prediction schedules every step "
        "(TTFT short)"),
    "max_queued_requests": Unmodelled(None, "not modelled: the model queues every request (none is rejected)"),
    # arg_groups/fields/memory.py --enable-hicache: a host-memory tier under the radix cache
    "enable_hierarchical_cache": Unmodelled(
        False, "not modelled: prefixes evicted from the GPU come back from host memory (HiCache), so more prefix "
               "hits where prefixes repeat; the model's radix cache has the GPU pool only",
        "prefixes evicted from the GPU came back from host memory (HiCache): the prediction's radix cache has the "
        "GPU pool only (fewer hits where prefixes repeat)"),
    # defaults from arg_groups/fields/parallel.py, exec_.py and spec.py
    "enable_two_batch_overlap": Unmodelled(
        False, "not modelled: two micro-batches overlap compute and communication, which changes step times (DP "
               "attention, expert parallelism)",
        "two micro-batches overlapped compute and communication: the prediction's step times are the profile's, "
        "without it"),
    "enable_single_batch_overlap": Unmodelled(
        False, "not modelled: computation and communication overlap within a batch, which changes step times",
        "computation and communication overlapped within a batch: the prediction's step times are the profile's, "
        "without it"),
    "pp_size": Unmodelled(
        1, "not modelled: pipeline parallelism (micro-batches through stages) changes every step's time and the "
           "batches in flight",
        "pipeline parallelism ({v} stages, micro-batches through them) changed every step's time and the batches "
        "in flight: the prediction runs one stage"),
    "speculative_accept_threshold_single": Unmodelled(
        1.0, "not modelled: " + _ACCEPT_LENGTH,
        "a relaxed acceptance ({v}) raised the accept length: the prediction's is the line's or the scenario's"),
    "speculative_accept_threshold_acc": Unmodelled(
        1.0, "not modelled: " + _ACCEPT_LENGTH,
        "a relaxed acceptance ({v}) raised the accept length: the prediction's is the line's or the scenario's"),
    "speculative_use_rejection_sampling": Unmodelled(False, "not modelled: " + _ACCEPT_LENGTH),
    # arg_groups/fields/spec.py: "dynamically adjusts num_steps based on acceptance rate"
    "speculative_adaptive": Unmodelled(
        False, "not modelled: the draft steps follow the acceptance rate at run time, while the model runs the "
               "stated window",
        "the server adjusted its draft steps to the acceptance rate as it ran: the prediction runs the fixed window "
        "(speculative_num_steps)"),
    # arg_groups/fields/schedule.py; managers/scheduler.py builds a PrefillDelayer
    # (managers/prefill_delayer.py) on a prefill-capable server: the DP ranks negotiate each
    # pass whether to prefill, a rank holding its prefill up to prefill_delayer_max_delay_passes
    "enable_prefill_delayer": Unmodelled(
        False, "not modelled: the DP ranks negotiate each pass whether to prefill (managers/prefill_delayer.py "
               "PrefillDelayer), holding a waiting prefill for up to prefill_delayer_max_delay_passes passes, while "
               "the model admits it at once",
        "prefills were held by the prefill delayer (up to prefill_delayer_max_delay_passes passes, "
        "managers/prefill_delayer.py) while the DP ranks negotiated: the prediction admits them at once (TTFT short "
        "under load)"),
    # arg_groups/overrides.py _sampling_backend_default: None resolves to flashinfer where the
    # platform has it, else pytorch; the sampling kernels' time is inside the profile's forwards
    # (measured with whatever its server sampled with), so either named backend is that server
    "sampling_backend": Unmodelled(
        None, "not modelled: the sampling kernels' time is the profile's, timed with its own server's backend",
        accepts=lambda v, _server: v in ("flashinfer", "pytorch"),
        allowed="null (SGLang's default: flashinfer where the platform has it, else pytorch), flashinfer or pytorch: "
                "the profile's forwards include the sampling its server ran"),
    "cpu_offload_gb": Unmodelled(
        0, "not modelled: weights offloaded to host memory are copied back every forward",
        "{v} GB of weights were offloaded to host memory and copied back every forward: the prediction's forwards "
        "are the profile's, without the copies"),
    # the profile holds the TP size: any positive integer here, checked against the profile's
    # when the scenario's profile is read (:func:`tp_sizes_run`, sim/defaults.py resolve_loaded)
    "tp_size": Unmodelled(
        1, "the tensor-parallel size is the profile's (hardware.tp_size; `specsched profile --analytic --tp N` "
           "writes one for a model and GPU)", accepts=lambda v, _s: _is_int(v) and v >= 1,
        allowed="the profile's tensor-parallel size (hardware.tp_size)"),
}
"""SGLang launch arguments (``ServerArgs`` names) that change results, that the model has no
setting for, and whose value the model does run (SGLang's default, or what :attr:`Unmodelled.accepts`
says): that value is accepted and left out with a note (:func:`accepted_note`), another refused
saying what it changes and what is allowed. ``scenario from-bench`` names a measured server's
other value in an assumption line (:attr:`Unmodelled.measured`)."""

SGLANG_ARGS_ELSEWHERE: dict[str, str] = {
    **_LIVES_ELSEWHERE, **{k: f"{u.refusal}; allowed: {u.allowed_text()}" for k, u in UNMODELLED.items()}}
"""SGLang launch arguments (``ServerArgs`` names; their other spellings, :data:`ALIASES`, are
answered as the field they name) a scenario's ``server`` block does not take, with where the
setting lives here or, for one the model does not have, what it changes; a scenario that
names one gets that line instead of the nearest key's spelling."""


RENAMED: dict[str, str] = {
    # arg_groups/fields/schedule.py: "The maximum number of tokens in the memory pool", an upper
    # bound on the profiled pool (mem_cache/kv_cache_configurator.py _apply_token_constraints),
    # which is how a stated server.max_total_num_tokens is read (sim/defaults.py)
    "max_total_tokens": "max_total_num_tokens",
    # arg_groups/cuda_graph_hook.py parse_cuda_graph_config: the decode phase's max_bs and bs
    "cuda_graph_max_bs_decode": "cuda_graph_max_bs",
    "cuda_graph_bs_decode": "cuda_graph_bs",
    # arg_groups/fields/parallel.py dp_size: Arg(aliases=["--data-parallel-size"])
    "data_parallel_size": "dp_size",
}
"""SGLang 0.5.23 names of a server key of the same meaning (the key's name is the one of
SGLang's ``ServerArgs`` before 0.5.14, or its runtime name)."""

_ATTN_DP = (("enable_dp_attention", "dp_size"),
            "arg_groups/parallel_hook.py handle_deprecated_dp_attention: SGLang reads --dp-size N "
            "--enable-dp-attention, the model's spelling, as --attn-dp-size N")

SPELLINGS: dict[str, tuple[tuple[str, ...], str]] = {
    **{name: ((key,), "") for name, key in RENAMED.items()},
    "disable_overlap_schedule": (("enable_overlap_schedule",), ""),
    "disable_cuda_graph": (
        ("disable_decode_cuda_graph", "disable_prefill_cuda_graph"),
        "arg_groups/cuda_graph_hook.py parse_cuda_graph_config: true disables both phases' graphs; false leaves "
        "them to the per-phase switches"),
    "attn_dp_size": _ATTN_DP,
    "attention_data_parallel_size": _ATTN_DP,   # attn_dp_size's Arg(aliases=[...])
}
"""SGLang 0.5.23 arguments the model has under its own server keys: name -> (the keys it sets,
where SGLang reads it so, for one that is not a plain rename: said in :func:`spelling_note`).
Read as those keys by :func:`as_server_keys`."""


def _spelled(name: str, value: Any, block: Mapping[str, Any]) -> dict[str, Any]:
    """The server keys (with their values) the SGLang argument ``name`` (of :data:`SPELLINGS`)
    at ``value`` sets, in ``block``, the server block it is written in; {} at a value that
    leaves them to their own defaults.

    Raises:
        FieldError: a value SGLang does not take, or a server key of ``block`` that says
            otherwise (both named; the key is relative to the block).
    """
    def check_beside(key: str, want: Any) -> None:
        if key in block and not same_setting(block[key], want):
            raise FieldError(f".{name}", value, f"given beside server.{key} {_yaml(block[key])}, which says "
                             f"otherwise ({name} {_yaml(value)} is {key} {_yaml(want)} here): give one of them")

    if name in RENAMED:
        if value is None and SGLANG_DEFAULTS[ALIASES.get(name, name)] is None:
            return {}   # SGLang's unset: the server key's own default
        check_beside(RENAMED[name], value)
        return {RENAMED[name]: value}
    if name == "attention_data_parallel_size":
        name = "attn_dp_size"
    if name == "attn_dp_size":
        if not _is_int(value) or value < 1:
            raise FieldError(f".{name}", value, "must be an integer >= 1 (SGLang: --attn-dp-size must be positive)")
        if value == 1:
            return {}   # no attention DP, or the deprecated spelling's width (dp_size with enable_dp_attention)
        dp = block.get("dp_size", 1)
        if _is_int(dp) and dp > 1:
            raise FieldError(f".{name}", value, f"given beside server.dp_size {dp}: SGLang 0.5.23 refuses "
                             "data-parallel replicas with attention data parallelism (arg_groups/parallel_hook.py "
                             f"handle_data_parallelism); write attn_dp_size {value} alone, or dp_size {value} with "
                             "enable_dp_attention: true")
        check_beside("enable_dp_attention", True)
        return {"enable_dp_attention": True, "dp_size": value}   # dp_size 1 beside it: one replica, SGLang's default
    if not isinstance(value, bool):
        raise FieldError(f".{name}", value, "must be true or false")
    if name == "disable_overlap_schedule":
        check_beside("enable_overlap_schedule", not value)
        return {"enable_overlap_schedule": not value}
    if not value:   # disable_cuda_graph false: the per-phase switches decide
        return {}
    for key in SPELLINGS[name][0]:
        check_beside(key, True)
    return dict.fromkeys(SPELLINGS[name][0], True)


def as_server_keys(block: Any) -> Any:
    """``block`` (a server block as read: a mapping) with each SGLang 0.5.23 name of
    :data:`SPELLINGS` in it replaced by the server keys it sets (:func:`_spelled`; the plain
    renames first, so ``attn_dp_size`` reads a ``data_parallel_size`` as ``dp_size``); anything
    else unchanged.

    Raises:
        FieldError: as :func:`_spelled`.
    """
    if not isinstance(block, Mapping) or not any(k in SPELLINGS for k in block):
        return block
    out = {k: v for k, v in block.items() if k not in SPELLINGS}
    for name in sorted((k for k in block if k in SPELLINGS), key=lambda k: k not in RENAMED):
        out.update(_spelled(name, block[name], out))
    return out


def _sets(key: str) -> tuple[str, ...]:
    """The server keys ``key`` of a server block sets: its :data:`SPELLINGS` keys, or itself."""
    return SPELLINGS[key][0] if key in SPELLINGS else (key,)


def without_respelled(base: Mapping[str, Any], over: Mapping[str, Any]) -> Mapping[str, Any]:
    """``base`` (a block, e.g. a server block) less what ``over`` (a block merged over it: an
    arm's, ``--set``'s) sets under another name, so that the later one decides, as it does
    under the same name: a ``disable_overlap_schedule`` over ``enable_overlap_schedule`` drops
    the latter, an ``enable_overlap_schedule`` over ``disable_overlap_schedule`` the former (an
    SGLang name that sets other keys too keeps those, as server keys). ``base`` itself where
    neither holds a name of :data:`SPELLINGS`."""
    if not any(k in SPELLINGS for k in (*base, *over)):
        return base
    replaced = {s for k in over for s in _sets(k)}
    out: dict[str, Any] = {}
    for k, v in base.items():
        if k in over or not set(_sets(k)) & replaced:
            out[k] = v
        elif k in SPELLINGS:
            try:
                out.update({s: x for s, x in _spelled(k, v, base).items() if s not in replaced})
            except FieldError:
                out[k] = v   # refused when the merged block is read
    return out


def is_inert(name: str) -> bool:
    """Whether ``name`` is an SGLang 0.5.23 launch argument that cannot change the prediction."""
    return name in INERT_ARGS


def _server_keys() -> frozenset[str]:
    """The ``server`` block's own keys (imported here: that module imports this one)."""
    from specsched.sim.server_args import ServerArgs

    return frozenset(ServerArgs.model_fields)


def at_default(name: str, value: Any) -> bool:
    """Whether ``name`` is an SGLang 0.5.23 launch argument the model has no key for, given at
    its declared default (:data:`SGLANG_DEFAULTS`, compared by :func:`same_setting`), the same
    server as one without it. Not for an inert name (left out whatever its value), an
    :data:`UNMODELLED` one (its own rule) nor one of :data:`SPELLINGS` (read as server keys)."""
    field = ALIASES.get(name, name)
    return (field in SGLANG_DEFAULTS and name not in INERT_ARGS and unmodelled(name) is None
            and name not in SPELLINGS and field not in _server_keys() and _is_declared_default(name, value))


ANY_VALUE = object()
""":func:`taken`'s value when none is known yet (a sweep axis' key checked before its values)."""


def taken(name: str, value: Any = ANY_VALUE) -> bool:
    """Whether a ``server`` block takes ``name``, no key of its own, at ``value``: an inert
    launch argument, an :data:`UNMODELLED` one (its value checked where the block is read), an
    SGLang name of a server key (:data:`SPELLINGS`), or any other at SGLang's default
    (:func:`at_default`); with :data:`ANY_VALUE`, any launch argument that some value is taken at."""
    if name in INERT_ARGS or unmodelled(name) is not None or name in SPELLINGS:
        return True
    if value is ANY_VALUE:
        return ALIASES.get(name, name) in SGLANG_DEFAULTS
    return at_default(name, value)


def launch_arg_line(name: str) -> str | None:
    """The refusal for ``name`` written in a ``server`` block that has no such key: where it
    lives or what it changes (:data:`SGLANG_ARGS_ELSEWHERE`), else, for any other SGLang
    0.5.23 launch argument, that the model has no setting for it and that its default is taken
    (:func:`at_default`); None for a name SGLang does not have (a typo: the caller says
    "unknown key; did you mean"), for an inert one and for one of :data:`SPELLINGS`. A
    name in the command line's spelling (``tp-size``, ``log-level``: dashes) of an SGLang
    argument gets the YAML spelling and what that one does (:func:`_dashed_line`)."""
    if "-" in name and name.replace("-", "_") in ALL_NAMES:
        return _dashed_line(name.replace("-", "_"))
    reason = SGLANG_ARGS_ELSEWHERE.get(name) or SGLANG_ARGS_ELSEWHERE.get(ALIASES.get(name, ""))
    if reason is not None:   # another spelling (tensor_parallel_size, enable_hicache) says what its field says
        return "not a server key here: " + reason
    if name in ALL_NAMES and name not in INERT_ARGS and name not in SPELLINGS:
        default = SGLANG_DEFAULTS[ALIASES.get(name, name)]
        return (f"an SGLang {SGLANG_VERSION} launch argument the model has no setting for; it may change "
                "timing, so it is refused rather than ignored: remove it to predict without it, or give "
                f"SGLang's default, {_yaml(default)}, the same server (docs/scenario-reference.md lists the "
                "server keys)")
    return None


def _dashed_line(name: str) -> str:
    """The refusal for an SGLang argument written as on the command line (dashes): its YAML
    key ``name`` (underscores), then where that one lives, that it is left out (inert) or its
    own refusal. Pasted as ``tp-size: 8`` it was answered "did you mean 'server.dp_size'?",
    and ``log-level`` "unknown key"."""
    # the server keys (imported here: that module imports this one)
    from specsched.sim.server_args import ServerArgs

    head = f"the command line's spelling: a YAML key is the argument's name with underscores, {name}"
    if name in ServerArgs.model_fields:
        return f"{head} (server.{name})"
    if name in INERT_ARGS:
        return f"{head} (accepted and left out: it cannot change the prediction)"
    if name in SPELLINGS:
        return f"{head} (read as {', '.join('server.' + k for k in SPELLINGS[name][0])})"
    return f"{head}; as {name}: {launch_arg_line(name)}"


def elsewhere_line(path: tuple[str, ...] | list[str]) -> str | None:
    """:func:`launch_arg_line` for an unknown key at ``path`` (its dotted parts, the key
    last) under a ``server`` block: the scenario's or a disaggregated role's (in a file or by
    ``--set``, the user copied it in, and the nearest spelling misleads: ``tp_size`` was
    answered with "did you mean dp_size"). None for a key of any other block."""
    if len(path) < 2 or path[-2] != "server":
        return None
    return launch_arg_line(str(path[-1]))


def unmodelled(name: str) -> Unmodelled | None:
    """The :data:`UNMODELLED` entry of ``name`` (a field or another spelling of one), if any."""
    return UNMODELLED.get(ALIASES.get(name, name))


def _role_over(server: Mapping[str, Any], role: str) -> Mapping[str, Any]:
    """A disaggregated role's server overrides in a raw server block (empty when none)."""
    layout = server.get("disaggregation")
    over = layout.get(role) if isinstance(layout, Mapping) else None
    over = over.get("server") if isinstance(over, Mapping) else None
    return over if isinstance(over, Mapping) else {}


def _role_view(server: Mapping[str, Any], role: str) -> dict[str, Any]:
    """The server a disaggregated role runs, as read (sim/server_args.py ``role_server``: the
    block under the role's overrides, ``disaggregation_mode`` the role)."""
    return {**server, **_role_over(server, role), "disaggregation_mode": role}


def _reached(server: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    """The servers ``server[key]`` reaches: the block itself; with a disaggregation layout,
    each role's that does not set ``key`` itself (the roles are what run)."""
    if not isinstance(server.get("disaggregation"), Mapping):
        return [server]
    return [_role_view(server, r) for r in ROLES if key not in _role_over(server, r)]


def _left_out(server: Mapping[str, Any], reached: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The launch arguments of a server block that are left out, with their values: the inert
    ones (and the /server_info state keys, :data:`SERVER_STATE`), the :data:`UNMODELLED` ones at a value the model runs on every server they reach
    (``reached``: the one server a role's override block applies to; else :func:`_reached`),
    and any other at SGLang's default (:func:`at_default`)."""
    out = {}
    for k, v in server.items():
        u = None if k in INERT_ARGS else unmodelled(k)
        if k in INERT_ARGS or k in SERVER_STATE or (u is not None and all(
                u.runs(v, s) for s in ([reached] if reached is not None else _reached(server, k)))) \
                or at_default(k, v):
            out[k] = v
    return out


def drop_inert(server: Any, inert_only: bool = False) -> Any:
    """``server`` (a server block as read: a mapping) without its inert launch arguments and
    without the others :func:`_left_out` leaves out, its disaggregated roles' overrides without
    the latter (their inert ones go in ``DisaggRole``'s validator, with
    ``inert_only``: an override block alone does not say which server it reaches); anything
    else unchanged. The dropped ones are named by :func:`launch_args_in`.

    Raises:
        FieldError: an inert argument's value is not of the type SGLang declares
            (:func:`inert_value_error`); the key is relative to the block (``.log_level``).
    """
    if not isinstance(server, Mapping):
        return server
    gone = {k: v for k, v in server.items() if k in INERT_ARGS} if inert_only else _left_out(server)
    for k, v in gone.items():
        if (why := inert_value_error(k, v)) is not None:
            raise FieldError(f".{k}", v, why)
    out = {k: v for k, v in server.items() if k not in gone} if gone else server
    layout = server.get("disaggregation")
    if inert_only or not isinstance(layout, Mapping):
        return out
    for role in ROLES:
        over = _role_over(server, role)
        role_gone = [k for k in _left_out(over, _role_view(server, role)) if k not in INERT_ARGS]
        if role_gone:
            layout = {**layout, role: {**layout[role], "server": {k: v for k, v in over.items() if k not in role_gone}}}
    return {**out, "disaggregation": layout} if layout is not server.get("disaggregation") else out


def launch_args_in(scenario: Any) -> dict[str, Any]:
    """The dotted keys (with their values) of the launch arguments a raw scenario mapping sets
    that :func:`drop_inert` leaves out, and of the :data:`SPELLINGS` read as server keys: in its
    ``server`` block and in each disaggregated role's (``server.disaggregation.decode.server.log_level``)."""
    server = scenario.get("server") if isinstance(scenario, Mapping) else None
    if not isinstance(server, Mapping):
        return {}
    gone = _left_out(server)
    out = {f"server.{k}": v for k, v in server.items() if k in gone or k in SPELLINGS}
    for role in ROLES:
        over = _role_over(server, role)
        gone = _left_out(over, _role_view(server, role))
        out.update({f"server.disaggregation.{role}.server.{k}": v for k, v in over.items()
                    if k in gone or k in SPELLINGS})
    return out


def inert_keys_in(scenario: Any) -> list[str]:
    """The dotted keys of the inert launch arguments a raw scenario mapping sets
    (:func:`launch_args_in`, less the ones at a value the model runs)."""
    return [k for k in launch_args_in(scenario) if is_inert(n := k.rsplit(".", 1)[-1]) or n in SERVER_STATE]


def tp_size_run(profile_tp: int | None, dp_attention_ranks: int = 1) -> tuple[int, str]:
    """The ``tp_size`` the model runs, and why: the profile's tensor-parallel size
    (``hardware.tp_size``; ``profile_tp`` None: the profile has no hardware block, one GPU, as
    a hardware block's default); with DP attention over a per-rank profile (TP 1), SGLang's
    ``tp_size`` counts every attention rank, one GPU each (arg_groups/parallel_hook.py:
    ``tp_size % dp_size == 0``, attn_tp = tp / dp)."""
    if profile_tp is None:
        tp, why = 1, "the profile states no tensor-parallel size (no hardware block): one GPU"
    else:
        tp, why = profile_tp, "the profile's hardware.tp_size"
    if tp == 1 and dp_attention_ranks > 1:
        return dp_attention_ranks, f"{why}, per DP-attention rank: SGLang's tp_size counts all {dp_attention_ranks}"
    return tp, why


def tp_size_refusal(given: Any, profile_tp: int | None, dp_attention_ranks: int = 1) -> str | None:
    """The refusal of ``tp_size: given`` for a profile of ``profile_tp`` (:func:`tp_size_run`),
    None when it is the TP size the model runs."""
    want, why = tp_size_run(profile_tp, dp_attention_ranks)
    if same_setting(given, want):
        return None
    return f"not a server key here: {UNMODELLED['tp_size'].refusal}; allowed: {want} ({why})"


def left_out_note(keys: Iterable[str]) -> str | None:
    """The run's one ``note:`` line naming the inert launch arguments left out (dotted keys,
    each once, in order); None when there are none."""
    keys = list(dict.fromkeys(keys))
    if not keys:
        return None
    state = " (and /server_info state)" if any(k.rsplit(".", 1)[-1] in SERVER_STATE for k in keys) else ""
    return (f"note: SGLang launch arguments{state} with no effect on the prediction, left out: " + ", ".join(keys))


def accepted_note(values: Mapping[str, Any]) -> str | None:
    """The run's one ``note:`` line naming the :data:`UNMODELLED` launch arguments accepted at a
    value the model runs (dotted key -> value, :func:`launch_args_in`; the others among them
    are skipped: they have :func:`left_out_note`, :func:`default_note`, :func:`spelling_note`);
    None when there are none."""
    named = [f"{k} {_yaml(v)}" for k, v in values.items() if unmodelled(k.rsplit(".", 1)[-1]) is not None]
    if not named:
        return None
    return ("note: SGLang launch arguments at the value the model runs (single instance; the profile's "
            "tensor-parallel size), left out: " + ", ".join(named))


def _is_declared_default(name: str, value: Any) -> bool:
    """Whether ``value`` is ``name``'s SGLang 0.5.23 declared default (:data:`SGLANG_DEFAULTS`,
    by :func:`same_setting`): for :func:`at_default`, and for a name of :data:`SPELLINGS`,
    which then sets nothing new. Null for a declared empty list or mapping is that default too:
    SGLang's /server_info reports such an argument left empty as null (``allowed_media_domains``)."""
    default = SGLANG_DEFAULTS[ALIASES.get(name, name)]
    if value is None and isinstance(default, (list, dict)) and not default:
        return True
    if default is None and isinstance(value, Mapping) and all(v is None or v == {} for v in value.values()):
        # a JSON config of empty parts is an unset one (/server_info reports cuda_graph_config
        # so: cuda_graph_hook.py parse_cuda_graph_config starts from the defaults and sets only
        # what a part gives)
        return True
    return same_setting(value, default)


def default_note(values: Mapping[str, Any]) -> str | None:
    """The run's one ``note:`` line naming the launch arguments of ``values`` (dotted key ->
    value, :func:`launch_args_in`) given at SGLang 0.5.23's default (:func:`at_default`, and a
    name of :data:`SPELLINGS` at its default); None when there are none."""
    named = [f"{k} {_yaml(v)}" for k, v in values.items()
             if at_default(n := k.rsplit(".", 1)[-1], v) or (n in SPELLINGS and _is_declared_default(n, v))]
    if not named:
        return None
    return (f"note: SGLang launch arguments at SGLang {SGLANG_VERSION}'s default, which launches the same server "
            "as leaving them out and changes nothing here, left out: " + ", ".join(named))


def spelling_note(values: Mapping[str, Any]) -> str | None:
    """The run's one ``note:`` line naming the :data:`SPELLINGS` of ``values`` (dotted key ->
    value) that are not a plain rename, with the server keys they were read as and where
    SGLang reads them so; None when there are none (a rename, ``max_total_tokens`` for
    ``max_total_num_tokens``, needs no line)."""
    named = []
    for k, v in values.items():
        n = k.rsplit(".", 1)[-1]
        if n in SPELLINGS and SPELLINGS[n][1] and not _is_declared_default(n, v):
            keys = ", ".join(f"{key}: {_yaml(x)}" for key, x in _spelled(n, v, {}).items())
            named.append(f"{k} {_yaml(v)} as {keys} ({SPELLINGS[n][1]})")
    if not named:
        return None
    return f"note: SGLang {SGLANG_VERSION} arguments read as the server keys they set: " + "; ".join(named)


def launch_arg_notes(values: Mapping[str, Any], left_out: Iterable[str]) -> list[str]:
    """The ``note:`` lines a run prints for the launch arguments its scenarios name: the inert
    ones left out (``left_out``: dotted keys), and of ``values`` (:func:`launch_args_in`) the
    unmodelled ones at a value the model runs, those at SGLang's default and the SGLang names
    read as server keys."""
    notes = (left_out_note(left_out), accepted_note(values), default_note(values), spelling_note(values))
    return [n for n in notes if n is not None]


def launch_arg_hint(key: str, near: str | None) -> str | None:
    """'; did you mean ...?' naming the SGLang 0.5.23 launch argument a misspelt server ``key``
    most likely meant, and what happens to it, when that argument is closer to ``key`` than
    ``near`` (the nearest key the model has; None: none close): a pasted ``enable_metricz`` is
    ``enable_metrics``, not the model's ``enable_mixed_chunk``. None when no launch argument is
    close (difflib ratio 0.8) or the model's key is at least as close (the caller's hint)."""
    hit = difflib.get_close_matches(key, sorted(ALL_NAMES), n=1, cutoff=0.8)
    if not hit:
        return None
    if near is not None and difflib.SequenceMatcher(None, key, near).ratio() >= \
            difflib.SequenceMatcher(None, key, hit[0]).ratio():
        return None
    what = ("an SGLang launch argument with no effect on the prediction, left out" if hit[0] in INERT_ARGS
            else "an SGLang launch argument")
    return f"; did you mean {hit[0]!r} ({what})?"
