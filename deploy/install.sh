#!/usr/bin/env bash
# Installs rnntd as a systemd service: binary, configuration, model, unit, service user.
#
#   deploy/install.sh [--build-dir DIR] [--prefix DIR] [--model DIR] [--destdir DIR] [--no-systemd]
#
#   --build-dir DIR  a configured and built CMake tree (default: build)
#   --prefix DIR     installation prefix (default: /usr/local)
#   --model DIR      model directory to install as PREFIX/share/rnntd/model
#                    (default: models/en-char-small when it holds a model)
#   --destdir DIR    stage everything under DIR instead of / (packaging, tests); implies --no-systemd
#   --no-systemd     do not create the user or touch systemctl
#
# Puts: PREFIX/bin/rnntd, PREFIX/share/rnntd/{openapi.yaml,rnntd.yaml,model/},
#       /etc/rnntd/rnntd.yaml (only when absent: an edited configuration is never overwritten),
#       /etc/systemd/system/rnntd.service. Then creates the system user rnntd, reloads systemd and
#       enables the service (start it with: systemctl start rnntd). On a host whose PID 1 is not systemd
#       (a container, a chroot) it says so, installs the same files and the user, and enables nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build prefix=/usr/local model="" destdir="" systemd=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --prefix) prefix=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --destdir) destdir=$2; systemd=0; shift 2 ;;
    --no-systemd) systemd=0; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$model" ] && [ -f models/en-char-small/model.yaml ]; then model=models/en-char-small; fi
if [ ! -x "$build/server/rnntd" ]; then
  echo "install.sh: $build/server/rnntd not built (cmake -S . -B $build && cmake --build $build)" >&2
  exit 1
fi
if [ -n "$model" ]; then
  for f in model.yaml weights.safetensors tokens.txt; do
    [ -f "$model/$f" ] || { echo "install.sh: $model has no $f" >&2; exit 1; }
  done
fi
# systemd is running as PID 1 exactly when /run/systemd/system exists (sd_booted(3)); checked before
# anything is changed, so such a host gets a whole installation without the systemctl steps.
booted=1
if [ "$systemd" = 1 ] && [ ! -d /run/systemd/system ]; then
  booted=0
  echo "install.sh: PID 1 is $(ps -o comm= -p 1 2>/dev/null || echo 'not systemd'), not systemd (a container or chroot?):" \
       "installing without enabling the service" >&2
fi
if [ "$systemd" = 1 ] && [ "$(id -u)" != 0 ]; then
  echo "install.sh: run as root (or use --destdir DIR / --no-systemd)" >&2
  exit 1
fi

root=${destdir%/}
share=$root$prefix/share/rnntd
etc=$root/etc/rnntd
unitdir=$root/etc/systemd/system

DESTDIR=$root cmake --install "$build" --prefix "$prefix" >/dev/null
install -d -m 0755 "$share" "$etc" "$unitdir"
if [ -z "$model" ] && [ ! -f "$share/model/model.yaml" ]; then
  echo "install.sh: warning: no model installed; pass --model DIR or set model.path in /etc/rnntd/rnntd.yaml" >&2
fi
if [ -n "$model" ]; then
  rm -rf "$share/model.new"
  install -d -m 0755 "$share/model.new"
  install -m 0644 "$model/model.yaml" "$model/weights.safetensors" "$model/tokens.txt" "$share/model.new/"
  rm -rf "$share/model"
  mv "$share/model.new" "$share/model"
fi
if [ ! -e "$etc/rnntd.yaml" ]; then
  sed "s|^  path: \"/usr/local/share/rnntd/model\"|  path: \"$prefix/share/rnntd/model\"|" conf/rnntd.yaml >"$etc/rnntd.yaml"
  chmod 0644 "$etc/rnntd.yaml"
  echo "installed $etc/rnntd.yaml"
else
  echo "kept the existing $etc/rnntd.yaml (the shipped one is $share/rnntd.yaml)"
fi
sed -e "s|/usr/local/bin/rnntd|$prefix/bin/rnntd|" -e "s|/usr/local/share/rnntd|$prefix/share/rnntd|" \
  deploy/rnntd.service >"$unitdir/rnntd.service"
chmod 0644 "$unitdir/rnntd.service"
"$root$prefix/bin/rnntd" --check-config --config "$etc/rnntd.yaml" >/dev/null

if [ "$systemd" = 1 ]; then
  if ! getent passwd rnntd >/dev/null; then
    useradd --system --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin \
      --user-group rnntd
    echo "created the system user rnntd"
  fi
  if [ "$booted" = 1 ]; then
    systemctl daemon-reload
    systemctl enable rnntd.service
    echo "enabled rnntd.service; start it with: systemctl start rnntd"
  else
    echo "installed $unitdir/rnntd.service but did not enable it (no systemd here); run the daemon by hand:"
    echo "  runuser -u rnntd -- $prefix/bin/rnntd --config /etc/rnntd/rnntd.yaml"
  fi
fi
echo "rnntd installed under ${root:-/}${prefix}"
