#!/bin/bash
# Container health probe without curl: GET http://127.0.0.1:$RNNTD_HEALTH_PORT$RNNTD_HEALTH_PATH over
# bash's /dev/tcp; exit 0 on a 200, 1 otherwise. Defaults: port 8080, path /health/live.
set -u
port=${RNNTD_HEALTH_PORT:-8080}
path=${RNNTD_HEALTH_PATH:-/health/live}
exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$path" >&3
read -r -t 2 proto code _ <&3 || exit 1
exec 3<&-
case "$proto $code" in
  "HTTP/1."?" 200") exit 0 ;;
  *) echo "rnntd-healthcheck: $path answered ${code:-nothing}" >&2; exit 1 ;;
esac
