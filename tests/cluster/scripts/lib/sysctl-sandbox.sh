#!/usr/bin/env bash
# Run a node agent (the kubelet, kube-proxy) with private stand-ins for the kernel settings it
# insists on setting. Start it as
#   unshare --mount --propagation unchanged sysctl-sandbox.sh STANDIN_DIR CMD [ARG...]
# Each file in STANDIN_DIR, named like kernel.panic, is bind-mounted over /proc/sys/kernel/panic
# in this mount namespace only: the agent "sets" the value and the shared machine's stays as it
# is.
# shellcheck disable=SC2016  # the $5 in each_mount's conditions is awk's, not the shell's
set -euo pipefail
standins="$1"
shift

# each_mount AWK_CONDITION COMMAND...: run COMMAND MOUNT_POINT for each mount point of this
# namespace that the condition on the mount point ($5) selects, in mount order. A busy machine
# mounts and unmounts all the while (podman, containerd): a mount gone since the listing is no
# failure.
# mountinfo escapes a space in a path as \040, hence printf %b.
each_mount() {
  local m
  awk "$1 { print \$5 }" /proc/self/mountinfo | while read -r m; do
    m="$(printf '%b' "$m")"
    "${@:2}" "$m" 2>/dev/null || ! mountpoint -q "$m" || { echo "sysctl-sandbox: ${*:2} $m failed" >&2; exit 1; }
  done
}

# /var/lib/kubelet stays shared with the machine: it carries the kubelet's volume mounts to
# containerd. Every other mount becomes a slave first: this namespace still follows the
# machine's mounts and unmounts, but nothing mounted or unmounted here reaches the machine
# (an unmount propagates through its parent's peers, so this comes before any of the below).
each_mount '$5 !~ "^/var/lib/kubelet(/|$)"' mount --make-slave

# This namespace's copies of the runtime's mounts (pods' root filesystems, shm, network
# namespaces) would keep each of them alive after containerd removes it, a pod's veth and
# address with it: they go (a lazy unmount takes the mounts below along).
each_mount '$5 ~ "^/run/(containerd|netns)(/|$)"' umount -l

for file in "$standins"/*; do
  mount --bind "$file" "/proc/sys/$(basename "$file" | tr . /)"
done
exec "$@"
