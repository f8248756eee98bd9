"""Host scheduling cost per decode (verify) step, by batch size.

Times, on the host, what the loop runs per verify step outside the forward itself:
``Scheduler.schedule()`` (filter finished, check decode memory, build the plan),
``DeviceTokens.step(plan)`` (the accept draws forced into the verify) and
``Scheduler.process_result()`` (commit tokens, free KV), for a running batch of B
speculative requests. Usage: python benchmarks/host_cost.py [--batch 1,64,256] [--steps 300]
Prints the median microseconds per step of each part and their sum.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specsched.sim.acceptance import AcceptanceModel  # noqa: E402
from specsched.sim.admission import make_policy  # noqa: E402
from specsched.sim.config import AcceptanceConfig, ServerArgs  # noqa: E402
from specsched.sim.device_tokens import DeviceTokens  # noqa: E402
from specsched.sim.plan import ForwardMode, StepOutput  # noqa: E402
from specsched.sim.request import Req  # noqa: E402
from specsched.sim.scheduler import Scheduler  # noqa: E402


def measure(batch: int, steps: int) -> dict[str, float]:
    """Median seconds per step of schedule / accept draws / process_result at ``batch``."""
    srv = ServerArgs(max_running_requests=max(batch, 8), max_total_num_tokens=10**8, chunked_prefill_size=-1,
                     max_prefill_tokens=10**8, speculative_algorithm="dspark", speculative_num_draft_tokens=6,
                     admission_delay="min_free_slots")
    s = Scheduler(srv, make_policy(srv))
    tokens = DeviceTokens(AcceptanceModel(AcceptanceConfig(mean_accept_length=3.2, request_spread=0.25), 6, 1))
    for i in range(batch):
        s.add_request(Req(i, 1024, 10**6))
    plan = s.schedule()  # one prefill of everyone
    s.process_result(plan, tokens.step(plan))
    t_s, t_d, t_p = [], [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        plan = s.schedule()
        t1 = time.perf_counter()
        out = tokens.step(plan)
        t2 = time.perf_counter()
        s.process_result(plan, out if isinstance(out, StepOutput) else out)
        t3 = time.perf_counter()
        assert plan.mode is ForwardMode.VERIFY and plan.batch_size == batch
        t_s.append(t1 - t0)
        t_d.append(t2 - t1)
        t_p.append(t3 - t2)
    med = {k: statistics.median(v) for k, v in (("schedule", t_s), ("accept_draws", t_d), ("process_result", t_p))}
    med["total"] = sum(med.values())
    return med


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", default="1,8,64,256")
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args()
    print(f"{'batch':>6}{'schedule us':>14}{'accept us':>12}{'process us':>13}{'total us':>11}")
    for b in (int(x) for x in args.batch.split(",")):
        m = measure(b, args.steps)
        print(f"{b:>6}{m['schedule'] * 1e6:>14.1f}{m['accept_draws'] * 1e6:>12.1f}{m['process_result'] * 1e6:>13.1f}{m['total'] * 1e6:>11.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
