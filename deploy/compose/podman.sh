#!/usr/bin/env bash
# Run docker-compose.yml under podman, where no Docker engine runs (as root, Debian bookworm).
#   podman.sh install           podman, runc and netavark (Debian), podman-compose (PyPI, into .venv)
#   podman.sh load              load the image of `./dev image` (.state/image/ascend-node-stack.tar)
#   podman.sh up [PROJECT]      install, load, then start the stack in the background
#   podman.sh down [PROJECT]    stop it and remove its containers, network and volumes
#   podman.sh compose ARGS...   podman-compose ARGS on docker-compose.yml
#   podman.sh podman ARGS...    podman ARGS
# Every podman call reads deploy/compose/containers.conf (CONTAINERS_CONF), not /etc/containers.
# The published ports are 8082 (exporter), 8083 (device-plugin) and 8084 (fault-manager).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export CONTAINERS_CONF="$ROOT/deploy/compose/containers.conf"
COMPOSE_VERSION=1.6.0
IMAGE_TAR="$ROOT/.state/image/ascend-node-stack.tar"
# Debian's podman ships a CNI conflist for its CNI backend; containerd (a Kubernetes node on the
# same machine) would read it from /etc/cni/net.d. We use netavark, so it is never installed.
CNI_CONFLIST=/etc/cni/net.d/87-podman-bridge.conflist

install() {
  local missing=() p
  for p in podman runc netavark aardvark-dns; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "path-exclude=$CNI_CONFLIST" >/etc/dpkg/dpkg.cfg.d/podman-no-cni-conflist
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  # Installed before the exclusion (by hand, or an older run): still podman's own, remove it.
  if [[ -f $CNI_CONFLIST ]] && dpkg -S "$CNI_CONFLIST" >/dev/null 2>&1; then rm -f "$CNI_CONFLIST"; fi
  [[ -x $ROOT/.venv/bin/python ]] || "$ROOT/dev" setup
  # 1.6.0 rather than Debian's 1.0.3: it knows `include` (the kubelet stand-in's file). Neither
  # waits for `service_healthy` with podman 4.3 (1.6.0 says so): the services retry the exporter.
  if [[ "$("$ROOT/.venv/bin/podman-compose" --version 2>/dev/null | sed -n 's/^podman-compose version //p')" != "$COMPOSE_VERSION" ]]; then
    "$ROOT/.venv/bin/python" -m pip install -q --disable-pip-version-check "podman-compose==$COMPOSE_VERSION"
  fi
}

compose() { "$ROOT/.venv/bin/podman-compose" -f "$ROOT/docker-compose.yml" "$@"; }

# down PROJECT: `podman-compose down -v`, then what netavark leaves of the project's network when
# its containers' teardown failed (seen when something unmounted their /run/netns entries): DNAT
# rules that would go on sending the published ports to addresses that no longer exist, the
# network's chains, its bridge and its aardvark-dns entry. Says so on stderr when it had to.
down() {
  local net="$1_default" bridge subnet dns=/run/containers/networks/aardvark-dns table rc=0
  read -r bridge subnet < <(podman network inspect "$net" \
    --format '{{.NetworkInterface}} {{range .Subnets}}{{.Subnet}}{{end}}' 2>/dev/null) || true
  compose -p "$1" down -v || rc=$?
  [[ -n $subnet ]] || return "$rc"
  if [[ -e $dns/$net ]] || iptables-save -t nat 2>/dev/null | grep -qF "dnat name: $net id:"; then
    echo "podman.sh: netavark did not tear down $net; removing what it left" >&2
    for table in nat filter; do
      iptables-save -t "$table" 2>/dev/null | awk -v t="$table" -v dnat="dnat name: $net id:" -v s=" $subnet " '
        /^-A / && (index($0, dnat) || ($2 ~ /^(POSTROUTING|NETAVARK_FORWARD)$/ && index($0, s))) {
          del = del "-D" substr($0, 3) "\n"
          if ($NF ~ /^NETAVARK-/ && $NF !~ /^NETAVARK-HOSTPORT-/) chains[$NF] = 1  # chains of this network only
        }
        END {
          if (del == "") exit
          for (c in chains) { flush = flush ":" c " - [0:0]\n"; drop = drop "-X " c "\n" }
          printf "*%s\n%s%s%sCOMMIT\n", t, flush, del, drop  # declaring a chain flushes it
        }' | iptables-restore --noflush
    done
    [[ -z $bridge ]] || ip link del "$bridge" 2>/dev/null || true
    rm -f "$dns/$net"
    [[ ! -f $dns/aardvark.pid ]] || kill -HUP "$(cat "$dns/aardvark.pid")" 2>/dev/null || true  # re-reads its entries
  fi
  return "$rc"
}

cmd="${1:-help}"; shift || true
case "$cmd" in
  install) install ;;
  load) podman load -q -i "$IMAGE_TAR" ;;
  up) install; podman load -q -i "$IMAGE_TAR"; compose -p "${1:-ascend-node-stack}" up -d ;;
  down) down "${1:-ascend-node-stack}" ;;
  compose) compose "$@" ;;
  podman) exec podman "$@" ;;
  *) sed -n '2,10p' "$0"; exit 2 ;;
esac
