#!/bin/bash
# On the GPU machine, from the repository root, after kernels/dev/stage-chip6.sh here and a `run` carrying .gpu/enc6:
# the on-chip layer wavefront of session 6 (issue 16 §1): lab checks + bench (variants 1, 7, 12-18), the per-phase
# clock profile of a wavefront step (LAB_PROF), bench_encoder at B 1, 2, 3, 8, 32 (same process as cuDNN; the wave
# column is the on-chip kernel where it fits) with the default options and with RNNT_CUDA_WAVE_CHIP_OPT=$OPT, the
# GPU kernel tests (quick) and test_encoder_chip under every option set, ncu source counters on the chip kernel,
# memcheck on the new variants' checks. At most 8 files come back: tests.log lab.log prof.log bench.log ncu.log
# src7.csv src_best.csv raw.csv.
# Runs 1-2 (commits bf23c0e, fc04900) had the options in cu_wave.cu (RNNT_CUDA_WAVE_CHIP_OPT / _CHUNK); since a71a246
# they live in the lab copy only (kernels/dev/chip_lab.cu), so the encoder steps measure the production kernel.
#   BUDGET_S=330 OPT=11 BEST=17 bash .gpu/enc6/device-chip6.sh [STEPS]                         (run 1)
#   BUDGET_S=300 BEST=19 PROF="7:1 19:1 20:1 7:3 19:3" ENC_OPTS="27:16 27:8 11:8" TEST_OPTS="16 27" \
#     LAB_VARIANTS=1,7,12,15,17,18,19,20,21 bash .gpu/enc6/device-chip6.sh env,lab,prof,encoder2,tests,memcheck,racecheck   (run 2)
#   STEPS: comma list of env,lab,prof,encoder,encoder2,tests,ncu,memcheck,racecheck (default: run 1's)
# encoder2: bench_encoder --batches 1,2,3 with the build's defaults, then once per OPT:CHUNK of ENC_OPTS
set -u
steps=${1:-env,lab,prof,encoder,tests,ncu,memcheck}
H=$(cd "$(dirname "$0")" && pwd)
source "$H/device-common.sh"
open_pack "$H/pack.tar.xz" /tmp/gc cudnn cublas cuda_runtime
export RNNT_TEST_DATA=$PWD/tests/data
OPT=${OPT:-11}    # the option bits bench_encoder's second run and the lab's 'best' stand for (1 early, 2 split, 4 hoist, 8 wstage)
BEST=${BEST:-17}  # the lab variant of those options
export LAB_VARIANTS=${LAB_VARIANTS:-1,7,11,12,13,14,15,16,17,18}
T=$OUT/tests.log
if has env; then { log env; nvidia-smi; for b in $B/*; do ldd $b | grep -i "not found"; done; } >> "$T" 2>&1; grep -E "H100|H200|Driver" "$T" | head -3; fi
if has lab; then
  log lab_lstm_wave; timeout $(tmo 120) $B/lab_lstm_wave > "$OUT/lab.log" 2>&1; echo "exit $?"
  grep -E "FAIL|checks:|^\|" "$OUT/lab.log" | grep -v "does not apply" | sed -E 's/all layers, W_hh on chip/chip/; s/layer by layer \(GEMM \+ persistent\)/by layer/' | cut -c1-160 | head -60
fi
if has prof; then
  for vb in ${PROF:-7:1 11:1 14:1 15:1 $BEST:1 7:3 $BEST:3}; do
    v=${vb%:*} b=${vb#*:}
    { log "profile variant $v B=$b"; LAB_PROF=1 timeout $(tmo 30) $B/lab_lstm_wave $v $b 300; echo "exit $?"; } >> "$OUT/prof.log" 2>&1
  done
  grep -E "^profile|^\| |steps without" "$OUT/prof.log" | cut -c1-200
fi
if has encoder; then
  { log "bench_encoder default options"; RNNT_CUDA_WAVE_CHIP=1 timeout $(tmo 120) $B/bench_encoder --fast --reps 10 --batches 1,2,3,8,32; echo "exit $?"
    log "bench_encoder RNNT_CUDA_WAVE_CHIP_OPT=$OPT"; RNNT_CUDA_WAVE_CHIP_OPT=$OPT RNNT_CUDA_WAVE_CHIP=1 timeout $(tmo 60) $B/bench_encoder --fast --reps 10 --batches 1,2,3; echo "exit $?"
  } > "$OUT/bench.log" 2>&1
  grep -E "^== |^device|^\| 5 x|wavefront|exit" "$OUT/bench.log" | cut -c1-300
fi
if has encoder2; then
  { log "bench_encoder defaults"; RNNT_CUDA_WAVE_CHIP=1 timeout $(tmo 60) $B/bench_encoder --fast --reps 10 --batches 1,2,3; echo "exit $?"
    for oc in ${ENC_OPTS-27:16}; do
      log "bench_encoder RNNT_CUDA_WAVE_CHIP_OPT=${oc%:*} RNNT_CUDA_WAVE_CHIP_CHUNK=${oc#*:}"
      RNNT_CUDA_WAVE_CHIP_OPT=${oc%:*} RNNT_CUDA_WAVE_CHIP_CHUNK=${oc#*:} RNNT_CUDA_WAVE_CHIP=1 timeout $(tmo 60) $B/bench_encoder --fast --reps 10 --batches 1,2,3; echo "exit $?"
    done
  } > "$OUT/bench.log" 2>&1
  grep -E "^== |^\| 5 x|exit" "$OUT/bench.log" | grep -v "(16) \|" | cut -c1-250
fi
if has tests; then
  { log "test_cuda_kernels quick"; RNNT_TEST_QUICK=1 timeout $(tmo 120) $B/test_cuda_kernels; echo "exit $?"
    for o in ${TEST_OPTS:-1 2 4 8 7 11}; do
      log "test_encoder_chip RNNT_CUDA_WAVE_CHIP_OPT=$o"; RNNT_CUDA_WAVE_CHIP_OPT=$o RNNT_TEST_ONLY='test_encoder_chip' timeout $(tmo 40) $B/test_cuda_kernels; echo "exit $?"
    done; } >> "$T" 2>&1
  grep -E "^== |exit |PASSED|FAILED|on chip|\[  FAILED|ERROR" "$T" | cut -c1-200 | head -40
fi
if has ncu && command -v ncu >/dev/null; then
  for v in 7 $BEST; do
    n=src7; [ $v = 7 ] || n=src_best
    { log "ncu k_wave_chip variant $v B=1"
      timeout $(tmo 90) ncu --clock-control none --import-source yes --section SpeedOfLight --section WarpStateStats --section SourceCounters --section SchedulerStats -k regex:k_wave_chip -c 1 -f -o /tmp/ncu_$v $B/lab_lstm_wave $v 1 300; echo "exit $?"
      ncu -i /tmp/ncu_$v.ncu-rep --print-details all; echo "exit $?"
      ncu -i /tmp/ncu_$v.ncu-rep --page source --csv --print-source sass > "$OUT/$n.csv" 2>&1 || ncu -i /tmp/ncu_$v.ncu-rep --page source --csv > "$OUT/$n.csv" 2>&1; echo "source page exit $?"
      [ $v = 7 ] && { ncu -i /tmp/ncu_$v.ncu-rep --page raw --csv > "$OUT/raw.csv" 2>&1; echo "raw exit $?"; }
    } >> "$OUT/ncu.log" 2>&1
  done
  grep -E "^== |Duration|SM Frequency|Throughput|Warp Cycles|Issued Warp|No Eligible|exit" "$OUT/ncu.log" | cut -c1-150 | head -40
fi
if has memcheck; then
  { log "memcheck lab checks ${MEM_VARIANTS:-16,17}"; LAB_VARIANTS=${MEM_VARIANTS:-16,17} LAB_CHECK_ONLY=1 timeout $(tmo 120) compute-sanitizer --tool memcheck --error-exitcode 9 $B/lab_lstm_wave 2>&1 | grep -vE "^check " | tail -4; echo "exit ${PIPESTATUS[0]}"; } >> "$T" 2>&1
  grep -E "memcheck|ERROR SUMMARY|checks:|exit" "$T" | tail -4
fi
if has racecheck; then
  { log "racecheck lab checks ${RACE_VARIANTS:-19,20}"; LAB_VARIANTS=${RACE_VARIANTS:-19,20} LAB_CHECK_ONLY=1 timeout $(tmo 120) compute-sanitizer --tool racecheck --error-exitcode 9 $B/lab_lstm_wave 2>&1 | grep -vE "^check " | head -30; echo "exit ${PIPESTATUS[0]}"; } >> "$T" 2>&1
  grep -E "racecheck|RACECHECK SUMMARY|Race|checks:|exit" "$T" | tail -5
fi
log done
