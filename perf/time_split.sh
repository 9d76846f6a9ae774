#!/usr/bin/env bash
# One launch of build/nccl_timer (built beforehand by perf/build_timer.sh) on N ranks under MPS, every
# collective of COLLECTIVES (comma-separated) from MIN_BYTES to MAX_BYTES, then rank 0's table of each
# collective in OUTDIR/LABEL_COLLECTIVE_N.txt, the names perf/side_by_side.py and perf/compare_configs.py
# read; the whole log in OUTDIR/LABEL_all_N.log. VAR=VALUE words set the timer's environment (a forced
# algorithm, stock's settings). Limit: TIMER_TIMEOUT seconds (default 300).
# Usage: perf/time_split.sh OUTDIR LABEL LIBDIR N COLLECTIVES MIN_BYTES MAX_BYTES [VAR=VALUE...]
set -u
out=$1 label=$2 lib=$3 n=$4 collectives=$5 min=$6 max=$7
shift 7
log=$out/${label}_all_$n.log
env "$@" LD_LIBRARY_PATH="$lib" timeout "${TIMER_TIMEOUT:-300}" python3 -m mscclpp_nccl.run -n "$n" --mps \
  --timeout "${TIMER_TIMEOUT:-300}" -- build/nccl_timer "$collectives" "$min" "$max" 2 20 >"$log" 2>&1 ||
  echo "timer $label at $n ranks failed (see $log)"
# Rank 0's lines, less the launcher's "[0] " prefix.
awk -v dir="$out" -v label="$label" -v n="$n" '
  !sub(/^\[0\] /, "") { next }
  /^# empty kernel launch/ { head = $0; next }
  /^# nccl_timer: / { file = dir "/" label "_" $3 "_" n ".txt"; print head > file }
  file { print > file }' "$log"
