#!/bin/bash
# A fresh run's fixed costs, side by side: `newsdedup run --no-postgres --no-semantic` on the bundled
# sample (38 articles, so nearly all of it is fixed cost) from each checkout given, one after the other,
# a fresh interpreter per run, ROUNDS+1 rounds (round 0 warms each tree's numba cache and counts too).
# One line per run: wall seconds from outside, the load average, the job's own step seconds.
#
#   git worktree add /tmp/base <rev> && lab/scripts/ab_sample.sh 2 /tmp/base "$PWD"
set -u
ROUNDS=$1; shift
HERE=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-$HERE/.venv/bin/python}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYSPARK_PYTHON=$PY
for r in $(seq 0 "$ROUNDS"); do
  for tree in "$@"; do
    out=$(mktemp -d); log=$(mktemp)
    S=$(date +%s.%N)
    (cd "$tree" && PYTHONPATH=$tree/lib "$PY" -m newsdedup.cli run --input samples/articles.parquet \
        --output "$out/out" --no-postgres --no-semantic > "$log" 2>&1)
    RC=$?; E=$(date +%s.%N)
    steps=$(grep -o "^seconds\.[a-z_]* *[0-9.]*" "$log" | grep -v "optimize\.\|semantic\." |
            awk '{sub("seconds.","",$1); printf "%s=%s ", $1, $2}')
    echo "round $r $tree rc=$RC wall $(echo "$E - $S" | bc) load $(cut -d' ' -f1 /proc/loadavg) $steps"
    rm -rf "$out" "$log"
  done
done
