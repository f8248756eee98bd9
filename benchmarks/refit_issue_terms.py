"""Re-derive a recorded runtime profile's host-issue terms with the profiler's current fits.

A profile written by ``specsched profile`` records, in its provenance, the medians it
measured: the host time to issue an extend (+ draft injection) by extend tokens, and every
eager spec cycle next to its graph-replayed twin. Older profiles fitted those medians with
a slope through the origin (extend) and a median difference (eager); the profiler now fits
``host.launch_per_extend_s`` + ``launch_per_extend_token_s`` (Theil-Sen) and
``gpu.eager_overhead_s`` + ``gpu.eager_host_issue_s`` (eager kernels run as the host
issues them: max(graph + floor, issue)), in runtime/profile_fit.py. This script applies
those same functions to the recorded medians, so a profile measured before the change gets
the new terms without a GPU and without looking at any scenario run.

    python benchmarks/refit_issue_terms.py docs/measurements/h200-v2/h200-1b.yaml \\
        --out docs/measurements/h200-v2/h200-1b-refit.yaml
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import specsched.runtime._requires_torch  # noqa: F401  (one line without torch)
import yaml
from specsched.runtime.profile_fit import eager_fit, extend_issue_fit
from specsched.sim.profile import load_profile
from specsched.sim.results import atomic_write_text

_EAGER = re.compile(r"bs (\d+) ctx (\d+): eager ([\d.]+) (ms|us|s) = ([\d.]+)x")
_EXTEND = re.compile(r"(\d+): ([\d.]+) (ms|us|s)")
_UNIT = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


def _text(raw: dict, key: str) -> str:
    return " ".join(str(raw.get("provenance", {}).get(key, "")).split())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    raw = yaml.safe_load(Path(args.profile).read_text())
    eager = [(int(b), int(c), float(t) * _UNIT[u], float(r))
             for b, c, t, u, r in _EAGER.findall(_text(raw, "gpu.eager_factor"))]
    ext_text = _text(raw, "host.launch_per_extend_token_s")
    ext_text = ext_text[ext_text.find("medians"):ext_text.find(". ", ext_text.find("medians"))]
    ext = [(int(n), float(t) * _UNIT[u]) for n, t, u in _EXTEND.findall(ext_text)]
    if not eager or not ext:
        print(f"{args.profile}: provenance lacks the eager or extend medians", file=sys.stderr)
        return 2
    floor, issue = eager_fit(eager)
    intercept, slope = extend_issue_fit([n for n, _ in ext], [t for _, t in ext])
    raw["gpu"]["eager_overhead_s"] = float(f"{floor:.6g}")
    raw["gpu"]["eager_host_issue_s"] = None if issue is None else float(f"{issue:.6g}")
    raw["host"]["launch_per_extend_s"] = float(f"{intercept:.6g}")
    raw["host"]["launch_per_extend_token_s"] = float(f"{slope:.6g}")
    prov = raw.setdefault("provenance", {})
    note = (" Re-derived by benchmarks/refit_issue_terms.py from the medians recorded here, with "
            "runtime.profile_fit.{} (no new measurement).")
    prov["gpu.eager_overhead_s"] = ("smallest eager - graph difference over the gpu.eager_factor points "
                                    "(GPU-bound floor)." + note.format("eager_fit"))
    prov["gpu.eager_host_issue_s"] = ("median eager cycle time of the host-bound gpu.eager_factor points (eager - "
                                      "graph above twice the floor): an eager cycle lasts max(graph + floor, this)."
                                      + note.format("eager_fit"))
    prov["host.launch_per_extend_s"] = ("Theil-Sen intercept of the extend issue medians under "
                                        "host.launch_per_extend_token_s." + note.format("extend_issue_fit"))
    prov["host.launch_per_extend_token_s"] = (prov.get("host.launch_per_extend_token_s", "")
                                              + " Now the Theil-Sen slope." + note.format("extend_issue_fit"))
    raw["name"] = f"{raw.get('name', 'profile')}-refit"
    raw.pop("path", None)
    text = yaml.safe_dump(raw, sort_keys=False, width=110)
    atomic_write_text(Path(args.out), text)
    load_profile(args.out)  # the result validates
    print(f"eager floor {floor * 1e3:.3f} ms, eager host issue "
          f"{'none' if issue is None else f'{issue * 1e3:.3f} ms'}; extend issue {intercept * 1e3:.3f} ms "
          f"+ {slope * 1e9:.3f} ns/token -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
