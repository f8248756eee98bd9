# TEMPORARY driver for one device run (deleted afterwards; not part of the package)
import gc, json, os, sys, time, traceback
import torch
from runtime.device import Device
from runtime.microbench import bench, prefilled_runner
out = os.environ.get("OUT", "/tmp")
print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0), flush=True)
def run(preset, kind, bs, ctx, window, graph=True, iters=20):
    t0 = time.time()
    try:
        dev = Device("cuda")
        r, rows = prefilled_runner(preset, batch=bs, context=ctx, window=window, device=dev)
        res = bench(r, rows, kind, context=ctx, graph=graph, iters=iters, preset=preset).as_dict()
        res["syncs"] = dict(dev.sync_counts); res["setup_s"] = round(time.time() - t0, 1)
        res["mem_gb"] = round(torch.cuda.max_memory_allocated() / 1e9, 1)
    except Exception as e:
        res = {"preset": preset, "kind": kind, "batch": bs, "error": repr(e), "tb": traceback.format_exc()[-1500:]}
    print(json.dumps(res), flush=True)
    with open(f"{out}/bench.jsonl", "a") as f:
        f.write(json.dumps(res) + "\n")
    gc.collect(); torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
cfgs = [("1b","spec",1,4096,8,True),("1b","spec",1,4096,8,False),("1b","decode",1,4096,1,True),
        ("8b","spec",1,4096,8,True),("8b","spec",1,4096,8,False),("8b","decode",1,4096,1,True),
        ("8b","spec",8,4096,8,True),("8b","spec",32,4096,8,True),("8b","spec",64,4096,8,True),("8b","spec",64,4096,6,True)]
if len(sys.argv) > 1 and sys.argv[1] == "kernels":
    from torch.profiler import profile, ProfilerActivity
    dev = Device("cuda")
    r, rows = prefilled_runner("8b", batch=1, context=4096, window=8, device=dev)
    with dev.use("forward"):
        r.spec_cycle(rows, [2]); dev.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            r.spec_cycle(rows, [2]); dev.synchronize()
    names = sorted({e.name for e in p.events() if e.device_type.name == "CUDA"})
    print("attention-ish kernels:", [n[:120] for n in names if any(k in n.lower() for k in ("attn", "attention", "fmha", "flash", "softmax", "cutlass"))], flush=True)
    sys.exit(0)
for c in cfgs:
    run(*c)
