#!/usr/bin/env bash
# A 52-point sweep (4 admission policies x 13 slot limits; 2 seeds each: 104 runs) on a shrunk burst, run
# with local processes and on a Dask cluster started here (scheduler + 2 workers on tcp),
# then the two tidy tables are compared value for value.
# Usage: bash benchmarks/sweep_local_vs_dask.sh [OUTDIR]
set -euo pipefail
out=${1:-results/sweep-check}
mkdir -p "$out"
grid=(--grid server.admission_delay=none,min_free_slots,min_free_slots_waiting_aware,demand_observed
      --grid server.max_running_requests=40,48,56,60,61,62,63,64,65,66,68,72,80)
common=(scenarios/burst256-ht.yaml "${grid[@]}" --seeds 2 --set workload.num_requests=64
        --set workload.output_len.value=512 --no-resume --no-progress)
/usr/bin/time -f "local: %e s wall, %M KB max RSS" specsched sweep "${common[@]}" --workers 2 --out "$out/local.parquet"
port=$((20000 + RANDOM % 20000))
dask scheduler --host 127.0.0.1 --port "$port" --no-dashboard > "$out/dask-scheduler.log" 2>&1 &
sp=$!
trap 'kill $sp $wp 2>/dev/null || true' EXIT
sleep 3
dask worker "tcp://127.0.0.1:$port" --nworkers 2 --nthreads 1 --no-dashboard > "$out/dask-worker.log" 2>&1 &
wp=$!
sleep 5
/usr/bin/time -f "dask: %e s wall, %M KB max RSS (client)" specsched sweep "${common[@]}" --scheduler "tcp://127.0.0.1:$port" --out "$out/dask.parquet"
python - "$out" <<'PY'
import sys
import pandas as pd
a = pd.read_parquet(f"{sys.argv[1]}/local.parquet")
b = pd.read_parquet(f"{sys.argv[1]}/dask.parquet")
keys = [c for c in a.columns if c != "value"]
a, b = a.sort_values(keys).reset_index(drop=True), b.sort_values(keys).reset_index(drop=True)
pd.testing.assert_frame_equal(a, b)
print(f"identical: {a['point'].nunique()} points x seeds = {len(a.groupby(['point', 'seed']))} runs, {len(a)} rows")
PY
