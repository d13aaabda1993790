#!/usr/bin/env bash
# Install, from Debian's package registry, what the single-node test cluster runs on
# (tests/cluster/scripts/cluster.sh). Idempotent and quiet: a machine that has everything
# installs nothing and asks no registry.
set -euo pipefail

PACKAGES=(
  etcd-server                   # the cluster's store (3.4)
  containerd runc               # the CRI runtime; runc because crun fails on this hybrid cgroup v1
  containernetworking-plugins   # bridge, host-local, portmap, loopback CNI plugins
  iptables conntrack            # kube-proxy's iptables mode and its conntrack cleanup
  openssl                       # the cluster's CA and certificates
  curl                          # health checks of etcd and the kubelet
  util-linux mount iproute2     # unshare, setsid, flock, mountpoint; mount, umount; ip
  gcc libc6-dev                 # the static pause binary of the sandbox image
  python3                       # tools.image.docker_archive packs the pause image
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

export DEBIAN_FRONTEND=noninteractive
# The package lists may be absent on a fresh machine, or too old to name current versions.
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
