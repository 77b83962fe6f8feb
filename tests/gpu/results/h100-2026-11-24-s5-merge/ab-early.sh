set -u
export PACK=.gpu/label/pack.tar.xz BUDGET_S=200
source tests/gpu/device-daemon.sh none > /dev/null
steps=x
for v in 1 0 1; do
  export RNNT_CUDA_EARLY_ENCODER=$v
  if start_daemon cuda "$GPU_CONF" > /dev/null; then
    load "early$v" 8 64 15
    stop_daemon cuda
  fi
done
