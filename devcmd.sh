set -u
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader > $R/gpu.txt
(OUT=$R/co timeout 215 bash bench/compute/run_gpu.sh --only turns --turn-cycles 6 --log $R/co-logs --tag co > $R/co.out 2>&1)
echo co rc=$?
cat $R/co/gputime.jsonl | cut -c1-600
tar czf $OUT/all.tgz -C $R .
