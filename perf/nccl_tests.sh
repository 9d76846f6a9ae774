#!/usr/bin/env bash
# Runs NVIDIA's nccl-tests binaries against ours and stock NCCL, interleaved in one command on the GPU
# machine (ranks share the GPU under MPS; stock with the settings its README asks for). Then:
#   python perf/nccl_tests_table.py OUTDIR [--csv FILE]
# Usage: perf/nccl_tests.sh OUTDIR NCCL_TESTS_DIR OURS_LIB STOCK_LIB "RANKS..." "MODES..." BINARY...
#   MODES: eager, graph (-G 5), and either with registration: eager_R1, graph_R2, ...
#   SIZES="-b 8 -e 256M -f 4" and ITERS="-n 20 -w 5" (the defaults) may be overridden from the environment;
#   OURS_ENV="NAME=VALUE ..." passes settings to our library's ranks; BEFORE_LIB=PATH also times another
#   build of ours with those settings (files before_*.txt; table them with --against before).
#   VARIANTS="LABEL:NAME=VALUE[;NAME=VALUE...] ..." also times our library once per variant with those
#   settings added (files LABEL_*.txt, LABEL lowercase letters and digits; table one with --ours LABEL),
#   so that an experiment's settings share one run of stock. A value may hold commas and '='.
#   STOCK_LIB "-" times no stock (an experiment between builds or variants of ours).
# e.g. perf/nccl_tests.sh /tmp/out $NT $PWD/mscclpp_nccl/lib/libnccl.so.2 $STOCK "4 8" "eager graph" all_reduce
set -u
out=${1:?usage: see the header}
nt=${2:?nccl-tests build directory}
ours=${3:?our libnccl.so.2}
stock=${4:?stock libnccl.so.2}
ranks=${5:?rank counts}
modes=${6:?modes}
shift 6
sizes=${SIZES:--b 8 -e 256M -f 4}
iters=${ITERS:--n 20 -w 5}
mkdir -p "$out"
declare -A variant_settings=()
variant_labels=""
for variant in ${VARIANTS:-}; do
  label=${variant%%:*}
  if ! [[ $label =~ ^[a-z][a-z0-9]*$ ]] || [[ $label =~ ^(ours|stock|before)$ ]] || [ "$label" = "$variant" ]; then
    echo "VARIANTS: '$variant' is not LABEL:SETTINGS with a new lowercase label" >&2
    exit 2
  fi
  variant_settings[$label]=${variant#*:}
  variant_labels+=" $label"
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for n in $ranks; do
  for mode in $modes; do
    flags=()
    case $mode in graph*) flags+=(-G 5) ;; esac
    case $mode in *_R*) flags+=(-R "${mode##*_R}") ;; esac
    for binary in "$@"; do
      for lib in ours $([ "$stock" = - ] || echo stock) ${BEFORE_LIB:+before} $variant_labels; do
        env=(-x NCCL_TESTS_DEVICE=0 -x NCCL_NVLS_ENABLE=0 -x CUDA_MPS_PIPE_DIRECTORY)
        if [ $lib != stock ]; then
          if [ $lib = before ]; then env+=(-x LD_PRELOAD="$BEFORE_LIB"); else env+=(-x LD_PRELOAD="$ours"); fi
          for setting in ${OURS_ENV:-}; do env+=(-x "$setting"); done
          if [ -n "${variant_settings[$lib]:-}" ]; then
            IFS=';' read -ra settings <<< "${variant_settings[$lib]}"
            for setting in "${settings[@]}"; do env+=(-x "$setting"); done
          fi
        else
          env+=(-x LD_PRELOAD="$stock" -x NCCL_MULTI_RANK_GPU_ENABLE=1)
          [ "$n" -gt 2 ] && env+=(-x NCCL_MAX_CTAS=$((32 / n)))
        fi
        # shellcheck disable=SC2086
        timeout 300 mpirun --allow-run-as-root --bind-to none --oversubscribe -np "$n" "${env[@]}" \
          "$nt/${binary}_perf" $sizes -g 1 -d bfloat16 $iters -c 0 "${flags[@]}" \
          > "$out/${lib}_${binary}_${n}_${mode}.txt" 2>&1 || echo "$lib $binary $n $mode: exit $?"
      done
    done
  done
done
