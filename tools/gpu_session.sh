#!/usr/bin/env bash
# One call on the lent GPU machine: install, test on the GPU, benchmark, run the conformance
# suite; results go to $OUT (a tarball + short summaries). Carry .whl (and .suite for the
# conformance suite). Usage, as the device command:
#   bash tools/gpu_session.sh [steps...]     steps: main tests probe bench conformance fusionhost sklearn startup dask tune profile timing
#   script (default: main tests probe bench conformance)
#   BENCH_ARGS="--suite copy,reduce" TEST_ARGS="tests/test_copy.py" bash tools/gpu_session.sh tests bench
#   TUNE=tune-lines.txt bash tools/gpu_session.sh tune   (a file of bench.tune argument lines)
#   PROFILE=profile-lines.txt bash tools/gpu_session.sh profile   (bench.profile lines, under ncu)
#   TIMING=timing-lines.txt bash tools/gpu_session.sh timing   (bench.profile --timing lines)
#   SCRIPTS=probe.py bash tools/gpu_session.sh script   (python probes)
# Pass FORGE_ARRAY_GIT=<commit> in the device command: the bench records it (the device copy of
# the tree may carry a stale .git).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/r"
steps=${*:-main tests probe bench conformance}
source .whl/setup.sh || exit 1
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -2
export FORGE_ARRAY_CACHE_DIR=/tmp/forge-array-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv | tee "$OUT/r/gpu.txt"
for step in $steps; do
  start=$(date +%s)
  case $step in
    main)
      python3 -m forge_array 2>&1 | tee "$OUT/r/main.txt" ;;
    tests)
      timeout ${TEST_TIMEOUT:-300} python3 -m pytest -q -x -p no:cacheprovider -n ${TEST_WORKERS:-8} \
        ${TEST_ARGS:-tests} 2>&1 | tee "$OUT/r/tests.txt" | tail -40 ;;
    probe)
      timeout 240 python3 -m bench.runtime_probe --out "$OUT/r" 2>&1 | tee "$OUT/r/probe.txt" | tail -30 ;;
    bench)
      # BENCH_ARGS is read as shell words (quote a --filter with spaces inside it)
      eval "timeout ${BENCH_TIMEOUT:-360} python3 -m bench.run ${BENCH_ARGS:-} --out \"$OUT/r/bench\"" 2>&1 \
        | tee "$OUT/r/bench.txt" | tail -80 ;;
    tune)
      # each non-comment line of $TUNE: arguments of one python -m bench.tune call
      grep -v '^\s*#' "${TUNE:?set TUNE to a file of bench.tune argument lines}" | grep -v '^\s*$' | \
        while IFS= read -r line; do
          echo "== tune $line"
          eval "timeout ${TUNE_TIMEOUT:-500} python3 -m bench.tune --out \"$OUT/r/tune\" $line" < /dev/null
        done 2>&1 | tee -a "$OUT/r/tune.txt" ;;
    profile)
      # each non-comment line of $PROFILE: "<name> <bench.profile arguments>", profiled by ncu
      NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
      grep -v '^\s*#' "${PROFILE:?set PROFILE to a file of bench.profile lines}" | grep -v '^\s*$' | \
        while IFS= read -r line; do
          name=${line%% *}; rest=${line#* }
          echo "== profile $name: $rest"
          eval "timeout ${PROFILE_TIMEOUT:-240} $NCU --profile-from-start off --clock-control none \
            --section LaunchStats --section Occupancy --section SpeedOfLight --section WarpStateStats \
            --section MemoryWorkloadAnalysis --section SchedulerStats \
            python3 -m bench.profile $rest" > "$OUT/r/profile-$name.txt" 2>&1
          grep -E "profiled:|^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Registers Per|Block Size|Grid Size|Achieved Occupancy|Dynamic Shared|Static Shared|Warp Cycles Per Issued" "$OUT/r/profile-$name.txt" | head -150
        done 2>&1 | tee -a "$OUT/r/profile.txt" ;;
    timing)
      # each non-comment line of $TIMING: bench.profile arguments, run with --timing (no ncu)
      grep -v '^\s*#' "${TIMING:?set TIMING to a file of bench.profile lines}" | grep -v '^\s*$' | \
        while IFS= read -r line; do
          eval "timeout ${TIMING_TIMEOUT:-200} python3 -m bench.profile --timing $line" < /dev/null
        done 2>&1 | tee -a "$OUT/r/timing.txt" ;;
    script)
      # each word of $SCRIPTS: a python script run as is (probes), output kept per script
      for f in ${SCRIPTS:?set SCRIPTS to python scripts}; do
        echo "== script $f"
        PYTHONPATH=$PWD:${PYTHONPATH:-} timeout ${SCRIPT_TIMEOUT:-200} python3 "$f" 2>&1 | tee "$OUT/r/$(basename "$f" .py).txt"
      done ;;
    startup)
      timeout ${STARTUP_TIMEOUT:-400} python3 -m bench.suite_startup ${STARTUP_ARGS:-} --out "$OUT/r/bench" 2>&1 \
        | tee "$OUT/r/startup.txt" | tail -20 ;;
    dask)
      timeout ${DASK_TIMEOUT:-400} python3 -m bench.suite_dask ${DASK_ARGS:-} --out "$OUT/r/bench" 2>&1 \
        | tee "$OUT/r/dask.txt" | tail -60 ;;
    conformance)
      # CONF_MODES (default "on off"): on = automatic fusion deferring every step (MIN_SIZE 0,
      # none run eagerly for being computed alone); learn = the same, steps computed alone
      # learnt as a user's process learns them; off = automatic fusion off
      for mode in ${CONF_MODES:-on off}; do
        case $mode in
          on) fenv="FORGE_ARRAY_FUSION=1 FORGE_ARRAY_FUSION_MIN_SIZE=0 FORGE_ARRAY_FUSION_ALONE=0" ;;
          learn) fenv="FORGE_ARRAY_FUSION=1 FORGE_ARRAY_FUSION_MIN_SIZE=0" ;;
          *) fenv="FORGE_ARRAY_FUSION=0" ;;
        esac
        echo "== conformance, automatic fusion $mode ($fenv)"
        env $fenv timeout ${CONF_TIMEOUT:-300} python3 conformance/run.py --suite .suite/array-api-tests --device cuda:0 \
          --max-examples ${CONF_EXAMPLES:-20} -n ${CONF_WORKERS:-12} --json "$OUT/r/conformance-fusion-$mode.json" 2>&1 \
          | tee "$OUT/r/conformance-fusion-$mode.txt" | tail -30
      done ;;
    sklearn)
      timeout ${SKLEARN_TIMEOUT:-300} python3 -m bench.suite_sklearn ${SKLEARN_ARGS:-} --out "$OUT/r/bench" 2>&1 \
        | tee "$OUT/r/sklearn.txt" | tail -20 ;;
    fusionhost)
      timeout 200 python3 -m bench.fusion_host --json "$OUT/r/fusion_host.json" 2>&1 | tee "$OUT/r/fusion_host.txt"
      timeout 200 python3 -m bench.fusion_host --break-even --json "$OUT/r/fusion_break_even.json" 2>&1 \
        | tee "$OUT/r/fusion_break_even.txt" ;;
  esac
  echo "== step $step took $(( $(date +%s) - start )) s" | tee -a "$OUT/r/steps.txt"
done
tar -czf "$OUT/results.tar.gz" -C "$OUT" r && rm -rf "$OUT/r"
ls -la "$OUT"
