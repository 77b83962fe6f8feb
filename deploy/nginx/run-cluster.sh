#!/usr/bin/env bash
# N rnntd daemons on loopback ports with nginx (Debian's package) in front, as the current user: no
# root, no system file touched; everything lives in one state directory.
#
#   deploy/nginx/run-cluster.sh [--dir DIR] [--listen ADDR:PORT] [--detach] N
#       start N daemons (free ports picked by the kernel) and nginx; print the URL. In the foreground
#       (the default) Ctrl-C or SIGTERM stops everything; with --detach the script returns and
#       `run-cluster.sh --dir DIR stop` stops it later.
#   deploy/nginx/run-cluster.sh --dir DIR restart I    SIGTERM daemon I (it drains), wait for its exit,
#       start it again on the same port and wait until /health/ready says 200
#   deploy/nginx/run-cluster.sh --dir DIR rolling-restart    every daemon in turn, as above, waiting
#       the upstream's fail_timeout between two so nginx has taken the previous one back
#   deploy/nginx/run-cluster.sh --dir DIR stop          SIGTERM everything, wait for the drains
#   deploy/nginx/run-cluster.sh --dir DIR status        one line per process
#
# Environment: RNNTD_BIN (build/server/rnntd), RNNTD_CONFIG (conf/rnntd.yaml), RNNTD_MODEL
# (models/en-char-small), RNNTD_ARGS (more daemon flags, e.g. "--backend cpu"), RNNTD_NGINX (nginx),
# RNNTD_MAX_FAILS (1) and RNNTD_FAIL_TIMEOUT_S (2): nginx's passive health check per daemon.
# The nginx limits come from the daemons' effective configuration (rnntd --print-config): body size,
# idle and read timeouts, connections per daemon. The template is deploy/nginx/rnntd.conf.template.
#
# State directory: nginx.conf, nginx.pid, nginx.port, access.log, error.log, tmp/, and per daemon
# rnntd-I/{pid,port,stderr.log}.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
BIN=${RNNTD_BIN:-$src/build/server/rnntd}
CONFIG=${RNNTD_CONFIG:-$src/conf/rnntd.yaml}
MODEL=${RNNTD_MODEL:-$src/models/en-char-small}
NGINX_BIN=${RNNTD_NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
# nginx reads NGINX itself (listening sockets handed over in a binary upgrade): never pass one on.
unset NGINX
MAX_FAILS=${RNNTD_MAX_FAILS:-1}
FAIL_TIMEOUT=${RNNTD_FAIL_TIMEOUT_S:-2}
read -r -a EXTRA <<<"${RNNTD_ARGS:-}"

die() { echo "run-cluster: $*" >&2; exit 1; }

dir="" listen="" detach=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --listen) listen=$2; shift 2 ;;
    --detach) detach=1; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || die "usage: run-cluster.sh [--dir DIR] [--listen ADDR:PORT] [--detach] N | --dir DIR restart I | rolling-restart | stop | status"

# ---- one value of the daemons' effective configuration: conf_value SECTION KEY
conf_value() {
  "$BIN" --print-config --config "$CONFIG" | awk -v sec="$1:" -v key="$2:" '
    /^[a-z_]+:/ { cur = $1 }
    cur == sec && $1 == key && !done { v = $2; gsub(/"/, "", v); print v; done = 1 }'
}

# alive PIDFILE: the recorded process still runs and is ours, not a later process that got its pid:
# a daemon's stderr is its log in this state directory, nginx's command line names this directory.
alive() {
  local pid
  [ -f "$1" ] || return 1
  pid=$(cat "$1")
  kill -0 "$pid" 2>/dev/null || return 1
  case "$1" in
    */nginx.pid) tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-p $dir " ;;
    *) [ "$(readlink "/proc/$pid/fd/2" 2>/dev/null)" = "$(dirname "$1")/stderr.log" ] ;;
  esac
}

# ---- start daemon I on PORT (0: the kernel picks); waits until it is ready, records pid and port
start_daemon() {
  local i=$1 port=$2 d="$dir/rnntd-$1"
  mkdir -p "$d"
  : >"$d/stderr.log"
  # setsid: a Ctrl-C at the terminal reaches the script, which then drains each daemon with SIGTERM.
  setsid "$BIN" --config "$CONFIG" --model "$MODEL" --listen 127.0.0.1 --port "$port" "${EXTRA[@]}" \
    </dev/null >/dev/null 2>>"$d/stderr.log" &
  echo $! >"$d/pid"
  local got="" n
  for n in $(seq 600); do
    if grep -q 'msg=ready' "$d/stderr.log"; then
      got=$(sed -n 's/.*msg=listening .*port=\([0-9]*\).*/\1/p' "$d/stderr.log" | tail -1)
      break
    fi
    kill -0 "$(cat "$d/pid")" 2>/dev/null || { cat "$d/stderr.log" >&2; die "rnntd $i exited during start"; }
    sleep 0.05
  done
  [ -n "$got" ] || { cat "$d/stderr.log" >&2; die "rnntd $i did not become ready in 30 s"; }
  echo "$got" >"$d/port"
}

# ---- SIGTERM daemon I and wait for the end of its drain (drain_timeout_s plus a margin)
stop_daemon() {
  local d="$dir/rnntd-$1" pid n limit
  alive "$d/pid" || return 0
  pid=$(cat "$d/pid")
  kill -TERM "$pid"
  limit=$(( ($(conf_value server drain_timeout_s) + 10) * 10 ))
  for n in $(seq "$limit"); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  echo "run-cluster: rnntd $1 (pid $pid) still running after its drain; SIGKILL" >&2
  kill -KILL "$pid" 2>/dev/null || true
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

write_nginx_conf() {
  local n=$1 servers="" i user_line="" max_conns idle upstream_idle
  max_conns=$(conf_value server max_connections)
  for i in $(seq 0 $((n - 1))); do
    servers+="        server 127.0.0.1:$(cat "$dir/rnntd-$i/port") max_fails=$MAX_FAILS fail_timeout=${FAIL_TIMEOUT}s max_conns=$max_conns;"$'\n'
  done
  if [ "$(id -u)" = 0 ]; then user_line="user $(id -un) $(id -gn);"; fi
  idle=$(conf_value server connection_timeout_s)
  upstream_idle=$(( idle > 2 ? idle / 2 : 1 ))
  mkdir -p "$dir/tmp"
  SERVERS="$servers" USER_LINE="$user_line" PREFIX="$dir" LISTEN="$listen" \
  MAX_BODY=$(conf_value limits max_body_bytes) IDLE=$idle UPSTREAM_IDLE=$upstream_idle \
  READ=$(conf_value server request_timeout_s) TRIES=$n \
  RETRY=$(( $(conf_value server request_timeout_s) + 10 )) \
  python3 - "$here/rnntd.conf.template" "$dir/nginx.conf" <<'EOF'
import os, re, sys
e = os.environ
values = {"PREFIX": e["PREFIX"], "USER_LINE": e["USER_LINE"], "LISTEN": e["LISTEN"],
          "SERVERS": e["SERVERS"].rstrip("\n"), "MAX_BODY": e["MAX_BODY"], "IDLE_TIMEOUT_S": e["IDLE"],
          "UPSTREAM_IDLE_S": e["UPSTREAM_IDLE"], "READ_TIMEOUT_S": e["READ"], "TRIES": e["TRIES"],
          "RETRY_WINDOW_S": e["RETRY"]}
text = open(sys.argv[1]).read()
def sub(m):
    if m.group(1) not in values:
        sys.exit("run-cluster: the template names @%s@, which has no value" % m.group(1))
    return values[m.group(1)]
body = re.sub(r"@([A-Z_]+)@", sub, text.split("\n\n", 1)[1])  # the header comment names them all
open(sys.argv[2], "w").write("# Generated by deploy/nginx/run-cluster.sh from rnntd.conf.template\n" + body)
EOF
}

start_nginx() {
  local try
  for try in 1 2 3 4 5; do
    if [ -z "$listen" ] || [ "$try" -gt 1 ]; then listen="127.0.0.1:$(free_port)"; fi
    write_nginx_conf "$1"
    "$NGINX_BIN" -t -q -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" || die "nginx -t failed on $dir/nginx.conf"
    # daemon on: the master forks and writes nginx.pid; it is ours alone (its own prefix and pid file).
    if "$NGINX_BIN" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" 2>>"$dir/error.log"; then
      echo "${listen##*:}" >"$dir/nginx.port"
      return 0
    fi
    grep -q 'Address already in use' "$dir/error.log" || { cat "$dir/error.log" >&2; die "nginx did not start"; }
  done
  die "nginx found no free port"
}

stop_all() {
  local d i
  if alive "$dir/nginx.pid"; then
    # QUIT: nginx finishes the requests it is serving, then exits.
    kill -QUIT "$(cat "$dir/nginx.pid")" 2>/dev/null || true
    for i in $(seq 100); do alive "$dir/nginx.pid" || break; sleep 0.1; done
  fi
  for d in "$dir"/rnntd-*; do [ -d "$d" ] && stop_daemon "${d##*/rnntd-}"; done
  return 0
}

daemon_count() { local n=0 d; for d in "$dir"/rnntd-*; do [ -d "$d" ] && n=$((n + 1)); done; echo "$n"; }

restart_daemon() {
  local i=$1 port
  [ -f "$dir/rnntd-$i/port" ] || die "no daemon $i in $dir"
  port=$(cat "$dir/rnntd-$i/port")
  stop_daemon "$i"
  start_daemon "$i" "$port"
  echo "rnntd $i restarted on 127.0.0.1:$port (pid $(cat "$dir/rnntd-$i/pid"))"
}

case "$1" in
  restart|rolling-restart|stop|status)
    [ -n "$dir" ] && [ -d "$dir" ] || die "$1 needs --dir DIR of a running cluster"
    dir=$(cd "$dir" && pwd -P)
    case "$1" in
      restart) [ $# -eq 2 ] || die "restart needs the daemon's index"; restart_daemon "$2" ;;
      rolling-restart)
        n=$(daemon_count)
        for i in $(seq 0 $((n - 1))); do
          restart_daemon "$i"
          if [ "$i" -lt $((n - 1)) ]; then sleep "$FAIL_TIMEOUT"; fi
        done ;;
      stop) stop_all; echo "stopped the cluster in $dir" ;;
      status)
        for d in "$dir"/rnntd-*; do
          st=down; alive "$d/pid" && st="up pid $(cat "$d/pid")"
          echo "${d##*/} 127.0.0.1:$(cat "$d/port" 2>/dev/null) $st"
        done
        st=down; alive "$dir/nginx.pid" && st="up pid $(cat "$dir/nginx.pid")"
        echo "nginx 127.0.0.1:$(cat "$dir/nginx.port" 2>/dev/null) $st" ;;
    esac
    exit 0 ;;
esac

n=$1
[[ "$n" =~ ^[1-9][0-9]*$ ]] || die "N must be a positive number, not '$n'"
[ -x "$BIN" ] || die "$BIN is not built (cmake -S . -B build && cmake --build build)"
command -v "$NGINX_BIN" >/dev/null || die "no nginx (deploy/install-deps.sh installs Debian's)"
"$BIN" --check-config --config "$CONFIG" >/dev/null
if [ -z "$dir" ]; then dir=$(mktemp -d "${TMPDIR:-/tmp}/rnntd-cluster.XXXXXX"); fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd -P)
if [ "$detach" = 0 ]; then trap 'stop_all' EXIT; trap 'exit 130' INT TERM; fi
for i in $(seq 0 $((n - 1))); do start_daemon "$i" 0; done
start_nginx "$n"
echo "rnntd cluster: $n daemons behind nginx at http://127.0.0.1:$(cat "$dir/nginx.port") (state in $dir)"
if [ "$detach" = 1 ]; then exit 0; fi
echo "Ctrl-C stops nginx and drains the daemons"
while alive "$dir/nginx.pid"; do sleep 1; done
echo "run-cluster: nginx exited" >&2
exit 1
