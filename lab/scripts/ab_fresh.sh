#!/bin/bash
# The job at two revisions, side by side: `newsdedup run --no-postgres` (stages 1-3; conf: stage 4 off) in a
# fresh interpreter per run, base then this checkout, ROUNDS times, on the same snapshot; wall seconds from
# outside and the load average around each run go to WORK/ab.txt, each run's log (with its step timings)
# to WORK/<side>_<round>.log. Summarise with: python -m newsdedup_lab.ab_summary WORK
# With FROM (an earlier run's output), every run starts from a fresh copy of it: CORPUS is then a slice,
# run incrementally against that stored archive.
#
#   git worktree add /tmp/base <rev> && lab/scripts/ab_fresh.sh /tmp/base/lib CORPUS.parquet 3 /tmp/ab [FROM]
set -u
BASE_LIB=$1; CORPUS=$2; ROUNDS=$3; WORK=$4; FROM=${5:-}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-$HERE/.venv/bin/python}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYSPARK_PYTHON=$PY
mkdir -p "$WORK"
echo '{"semantic": {"enabled": false}}' > "$WORK/nosem.yaml"
for r in $(seq 1 "$ROUNDS"); do
  for side in base main; do
    if [ "$side" = base ]; then LIB=$BASE_LIB; else LIB=$HERE/lib; fi
    OUT=$WORK/out_$side; rm -rf "$OUT"
    if [ -n "$FROM" ]; then cp -r "$FROM" "$OUT" && sync; fi
    L1=$(cut -d' ' -f1 /proc/loadavg); S=$(date +%s.%N)
    PYTHONPATH=$LIB "$PY" -m newsdedup.cli run --conf "$WORK/nosem.yaml" --input "$CORPUS" --output "$OUT" \
        --no-postgres > "$WORK/${side}_$r.log" 2>&1
    RC=$?; E=$(date +%s.%N); L2=$(cut -d' ' -f1 /proc/loadavg)
    echo "round $r $side rc=$RC wall $(echo "$E - $S" | bc) load $L1 -> $L2" | tee -a "$WORK/ab.txt"
  done
done
