#!/usr/bin/env bash
# Writes the analytic profiles these scenarios read (profiles/, beside them): no GPU needed.
set -euo pipefail
cd "$(dirname "$0")" && mkdir -p profiles
for spec in "llama-3.1-8b H100 1" "llama-3.1-70b MI355X 4" "qwen3-30b-a3b H200 2" "deepseek-v3 H200 8" \
            "qwen2.5-7b MI300X 1" "gpt-oss-120b H100 2"; do
  set -- $spec
  specsched profile --analytic --model "$1" --gpu "$2" --tp "$3" --out "profiles/$1-$2-tp$3.yaml"
done
