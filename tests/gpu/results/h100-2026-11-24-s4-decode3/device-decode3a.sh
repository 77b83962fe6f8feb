#!/bin/bash
# Run 1 of the decode3 helper (issue 16 §3). Carry [".gpu/decode3"]:  bash .gpu/decode3/device-decode3a.sh
# (1) the grid loop (RNNT_CUDA_DECODE=grid, cu_dec_grid) smoke + its tests; (2) where the WHILE graph's ~50 us a step
# goes at B 256 (shipped model, fp16): the host-driven loop's phase split (bench_engine --extras 1) and ncu of each
# per-step kernel (host loop: ncu cannot profile a graph with conditional nodes), the cluster loop's phase clocks at
# G 16; (3) the decode loop at B 8-256: WHILE graph, default, grid loop (all blocks / one per SM), alternated.
steps=all
source .gpu/decode3/device-common.sh
export RNNT_TEST_DATA=$PWD/tests/data
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
unpack .gpu/decode3/pack.tar.xz /tmp/b_d3
export LD_LIBRARY_PATH=; use_libs /tmp/b_d3/lib cublas cuda_runtime cufft
D=/tmp/b_d3
bench() { # [VAR=VALUE...]
  log "bench_engine ${BATCHES:-8,16,32,64,128,256} extras ${EX:-0} $*"
  env "$@" timeout ${BT:-60} $D/bin/bench_engine models/en-char-small --batches ${BATCHES:-8,16,32,64,128,256} \
    --seconds 10 --reps ${REPS:-7} --extras ${EX:-0} 2>&1 | grep -E "^\| [0-9]|rror|cuda|dec_cluster"
}
BT=40 BATCHES=1,17,256 REPS=1 bench RNNT_CUDA_DECODE=grid
log "test_cuda_engine large batch"; RNNT_TEST_ONLY=test_large_batch timeout $(tmo 100) $D/bin/test_cuda_engine > $OUT/lb.log 2>&1; echo "exit $?"; grep -E "PASSED|FAILED|ERROR|batches of|differs" $OUT/lb.log | head
for round in 1 2; do
  [ $round = 2 ] && export BATCHES=32,256
  bench RNNT_CUDA_DECODE=while
  bench RNNT_CUDA_DECODE=grid
  bench RNNT_CUDA_DECODE=grid RNNT_CUDA_DEC_GRID_TILE=0
  bench RNNT_CUDA_DECODE=grid RNNT_CUDA_DEC_GRID_TILE=2
  bench
done
unset BATCHES
bench RNNT_CUDA_DECODE=grid RNNT_CUDA_DEC_GRID_BLOCKS=1
BATCHES=256 EX=1 REPS=3 bench
BATCHES=32,256 REPS=1 bench RNNT_CUDA_DECODE=cluster RNNT_CUDA_DEC_CLUSTER_WARPS=16 RNNT_CUDA_DEC_TRACE=1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
log "ncu: the per-step kernels at B 256 (host loop)"
RNNT_CUDA_DECODE=host timeout $(tmo 120) $NCU --clock-control none -k regex:"k_pred_layer|k_pred_proj|k_joint_argmax|k_dec_update" \
  -s 800 -c 8 --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
  $D/bin/bench_engine models/en-char-small --batches 256 --seconds 10 --reps 1 --extras 0 > $OUT/ncu256.txt 2>&1
echo "exit $?"; grep -E "  k_|Duration|Registers Per|Grid Size|Achieved Occ|Warp Cycles Per Issued|Compute \(SM\) T|Memory Throughput" $OUT/ncu256.txt | head -60
log "ncu: k_dec_grid at B 256"
RNNT_CUDA_DECODE=grid timeout $(tmo 90) $NCU --clock-control none -k regex:k_dec_grid -s 2 -c 1 --section SpeedOfLight \
  --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
  $D/bin/bench_engine models/en-char-small --batches 256 --seconds 10 --reps 1 --extras 0 > $OUT/ncugrid.txt 2>&1
echo "exit $?"; grep -E "Duration|Registers Per|Grid Size|Achieved Occ|Warp Cycles Per Issued|Stall|Eligible|Compute \(SM\) T|Memory Throughput" $OUT/ncugrid.txt | head -30
