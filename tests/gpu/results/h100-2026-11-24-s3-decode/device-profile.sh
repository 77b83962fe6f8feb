#!/bin/bash
# Where the time goes (issue 16 §3): phase clocks of the cluster loop (RNNT_CUDA_DEC_TRACE=1, thread 0 of the
# first cluster's blocks 0 and 1), ncu on the cluster kernel at batch 1, and the WHILE loop's kernels'
# own durations at batch 1. Carry [".gpu/decode"]:  bash .gpu/decode/device-profile.sh
steps=all
source .gpu/decode/device-common.sh
unpack .gpu/decode/pack.tar.xz /tmp/b_decode
export LD_LIBRARY_PATH=; use_libs /tmp/b_decode/lib cublas cuda_runtime cufft
B=/tmp/b_decode/bin/bench_engine; M=models/en-char-small
for c in 8 16; do for nb in 1 32 256; do
  log "trace C $c B $nb"
  RNNT_CUDA_DECODE=cluster RNNT_CUDA_DEC_CLUSTER=$c RNNT_CUDA_DEC_TRACE=1 timeout 60 $B $M --batches $nb --seconds 10 --reps 1 --extras 0 2>&1 | grep -E "^\| [0-9]|dec_cluster" | tail -3
done; done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
log "ncu $NCU: cluster kernel, batch 1"
RNNT_CUDA_DECODE=cluster timeout 120 $NCU --clock-control none -k regex:k_dec_cluster -s 2 -c 1 --section SpeedOfLight \
  --section WarpStateStats --section SourceCounters --section LaunchStats --section MemoryWorkloadAnalysis \
  $B $M --batches 1 --seconds 10 --reps 1 --extras 0 > $OUT/ncu_cluster_b1.txt 2>&1; echo "exit $?"
grep -E "Duration|Stall|stall|Warp Cycles|Issued|Top|L1/TEX Hit|L2 Hit" $OUT/ncu_cluster_b1.txt | head -40
log "ncu: WHILE loop kernels, batch 1"
timeout 120 $NCU --clock-control none -k regex:"k_joint_argmax|k_dec_update|k_pred_layer|k_pred_proj" -s 200 -c 40 \
  --section SpeedOfLight $B $M --batches 1 --seconds 10 --reps 1 --extras 0 > $OUT/ncu_while_b1.txt 2>&1; echo "exit $?"
grep -E "k_joint|k_dec_upd|k_pred|Duration" $OUT/ncu_while_b1.txt | paste - - | awk '{print $1, $(NF)}' | sort | uniq -c | head -20
