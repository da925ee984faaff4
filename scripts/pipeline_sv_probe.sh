# session 11: the stats pipeline (1e5, 100) took 497 us (min 394, p90 550) in the bench of
# shared_vec, 367-370 us before: its steps with scan.shared_vec on and off, twice
for sv in true false true false; do
  echo "== shared_vec $sv"
  FORGE_ARRAY_TUNING="{\"scan\": {\"shared_vec\": $sv}}" timeout 120 python3 -m bench.cupy_workload --rows 1e5 --reps 30 2>&1 | tail -14
done
