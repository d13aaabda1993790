#!/usr/bin/env bash
# ./dev image [--route docker|debootstrap] [--out FILE]
# Build the stack's image, tagged as the DaemonSets name it (tools/image/ref.py), with the one
# install script deploy/image/install.sh, and write it as a docker-archive (default
# .state/image/ascend-node-stack.tar) that `ctr images import` and `podman load` read.
# Route: `docker build` of the Dockerfile where a Docker engine answers; otherwise the same
# script in a Debian bookworm chroot made by debootstrap (needs root), packed by
# tools/image/docker_archive.py. An archive already built from the same inputs is kept.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/ascend-node-stack/image"
OUT="$ROOT/.state/image/ascend-node-stack.tar"
ROUTE=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --route) ROUTE="$2"; shift 2 ;;
    --out) OUT="$(realpath -m "$2")"; shift 2 ;;
    *) echo "usage: ./dev image [--route docker|debootstrap] [--out FILE]" >&2; exit 2 ;;
  esac
done
log() { echo "image: $*" >&2; }
cd "$ROOT"
TAG="$("$PY" -m tools.image.ref)"
# Packages of the base: python3 for the services, python3-venv for install.sh's venv.
BASE_PACKAGES="python3,python3-venv,ca-certificates"
SOURCES=(Dockerfile libs services/dcmi-exporter services/device-plugin services/fault-manager deploy/image)

if [[ -z "$ROUTE" ]]; then
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then ROUTE=docker; else ROUTE=debootstrap; fi
fi
mkdir -p "$(dirname "$OUT")" "$CACHE"

# What the image is made of: the install script, the pins and the sources (not their caches).
inputs_key() {
  { echo "$ROUTE $TAG $BASE_PACKAGES"
    find "${SOURCES[@]}" -type f ! -path '*/__pycache__/*' ! -path '*.egg-info/*' ! -path '*/tests/*' \
      -print0 | sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-16
}
key="$(inputs_key)"
if [[ -f "$OUT" && -f "$OUT.key" && "$(cat "$OUT.key")" == "$key" ]]; then
  log "$OUT is up to date ($TAG)"; echo "$OUT"; exit 0
fi
started=$SECONDS

if [[ "$ROUTE" == docker ]]; then
  log "docker build -t $TAG"
  docker build -t "$TAG" "$ROOT" >&2
  docker save -o "$OUT" "$TAG"
else
  [[ $EUID -eq 0 ]] || { echo "image: the debootstrap route needs root (chroot, mounts)" >&2; exit 1; }
  command -v debootstrap >/dev/null 2>&1 || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  }
  # The machine's own Debian mirror, as apt is set up here.
  mirror="$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null ||
    true)"
  [[ -n "$mirror" ]] || mirror="$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list)"
  base="$CACHE/bookworm-minbase-$(echo "$BASE_PACKAGES" | sha256sum | cut -c1-8).tar"
  base_cached=true
  if [[ ! -f "$base" ]]; then
    base_cached=false
    log "debootstrap bookworm (minbase + $BASE_PACKAGES), once"
    tmp="$(mktemp -d)"
    debootstrap --variant=minbase --include="$BASE_PACKAGES" bookworm "$tmp/rootfs" "$mirror" >"$CACHE/debootstrap.log" 2>&1 ||
      { tail -20 "$CACHE/debootstrap.log" >&2; rm -rf "$tmp"; exit 1; }
    tar --numeric-owner --xattrs -C "$tmp/rootfs" -cf "$base.partial" . && mv "$base.partial" "$base"
    rm -rf "$tmp"
  fi
  work="$(mktemp -d "${TMPDIR:-/tmp}/ascend-image.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  rootfs="$work/rootfs"; mkdir "$rootfs"
  tar --numeric-owner --xattrs -C "$rootfs" -xf "$base"
  mkdir -p "$rootfs/src"
  tar --exclude=__pycache__ --exclude='*.egg-info' --exclude=tests -cf - "${SOURCES[@]:1}" | tar -C "$rootfs/src" -xf -
  # For the build only: name resolution and this machine's CA bundle (pip may need it to
  # reach the package index here). Neither stays in the image.
  cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
  cp "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" "$rootfs/tmp/build-ca.crt"
  log "running deploy/image/install.sh in the chroot"
  # A private mount namespace: /dev and /proc vanish with it, whatever happens.
  unshare -m --propagation private sh -c '
    set -e
    mount --rbind /dev "$1/dev"; mount -t proc proc "$1/proc"
    PIP_CERT=/tmp/build-ca.crt chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
      PIP_CERT=/tmp/build-ca.crt HOME=/root sh /src/deploy/image/install.sh /src
  ' _ "$rootfs" >&2
  # What python:3.11-slim leaves out too: documentation and translations.
  rm -rf "$rootfs/src" "$rootfs/tmp/build-ca.crt" "$rootfs/root/.cache" \
    "$rootfs"/usr/share/{doc,man,info,locale} "$rootfs"/var/cache/debconf/*-old
  : >"$rootfs/etc/resolv.conf"
  # The image's user, PATH and command are the Dockerfile's.
  "$PY" -m tools.image.docker_archive "$rootfs" "$OUT" --tag "$TAG" --dockerfile "$ROOT/Dockerfile" >/dev/null
fi
echo "$key" >"$OUT.key"
# How this archive was made, for docs/benchmarks.md (bench/realnode.py).
printf '{"tag": "%s", "route": "%s", "seconds": %d, "bytes": %d, "base_cached": %s}\n' "$TAG" "$ROUTE" \
  "$((SECONDS - started))" "$(stat -c %s "$OUT")" "${base_cached:-null}" >"$OUT.build.json"
log "built $TAG by $ROUTE in $((SECONDS - started)) s: $OUT ($(du -m "$OUT" | cut -f1) MiB)"
echo "$OUT"
