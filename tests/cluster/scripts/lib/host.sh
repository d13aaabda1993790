# shellcheck shell=bash
# What the cluster changes on the machine outside its own directories, and how `down` takes
# each of it back (sourced by cluster.sh, after common.sh): the node address on lo, IPv4
# forwarding for the pod bridge, iptables chains, mounts, network namespaces, the bridge.

# Chains made by kube-proxy and the kubelet (KUBE-*), CNI's portmap (CNI-*) and setup_forwarding.
# (podman's netavark names its chains NETAVARK-*; a CNI-backed podman would share CNI-*.)
OWN_CHAINS='^(KUBE-|CNI-|ASCEND-TEST-)'

add_node_address() {
  ip -4 addr show dev lo | grep -qF " $NODE_IP/32 " || ip addr add "$NODE_IP/32" dev lo
}

remove_node_address() {
  if ip -4 addr show dev lo | grep -qF " $NODE_IP/32 "; then ip addr del "$NODE_IP/32" dev lo; fi
}

# Pod -> Service -> pod traffic is routed back out through the bridge, which needs IPv4
# forwarding (the bridge plugin would switch it on anyway). A guard chain first in mangle's
# FORWARD keeps pods' traffic on the bridge: nothing is forwarded into or out of it from or to
# another link. down puts back the setting that up found (podman, for one, switches forwarding
# on again for each container it starts).
setup_forwarding() {
  local fwd=/proc/sys/net/ipv4/ip_forward
  [[ -f "$RUN_DIR/ip_forward.orig" ]] || cat "$fwd" >"$RUN_DIR/ip_forward.orig"
  iptables -t mangle -N ASCEND-TEST-FORWARD 2>/dev/null || iptables -t mangle -F ASCEND-TEST-FORWARD
  iptables -t mangle -A ASCEND-TEST-FORWARD -i "$CNI_BRIDGE" -o "$CNI_BRIDGE" -j RETURN
  iptables -t mangle -A ASCEND-TEST-FORWARD -i "$CNI_BRIDGE" -j DROP
  iptables -t mangle -A ASCEND-TEST-FORWARD -o "$CNI_BRIDGE" -j DROP
  iptables -t mangle -C FORWARD -j ASCEND-TEST-FORWARD 2>/dev/null ||
    iptables -t mangle -I FORWARD 1 -j ASCEND-TEST-FORWARD
  echo 1 >"$fwd"
}

restore_forwarding() {
  [[ -f "$RUN_DIR/ip_forward.orig" ]] || return 0
  cat "$RUN_DIR/ip_forward.orig" >/proc/sys/net/ipv4/ip_forward
  rm -f "$RUN_DIR/ip_forward.orig"
}

# remove_own_chains IPT: delete the chains matching OWN_CHAINS from every table of IPT
# (iptables or ip6tables), and the rules of other chains that jump to them; nothing else is
# touched. `kube-proxy --cleanup` would leave KUBE-* chains here (no ipset), hence by hand.
# In iptables-restore --noflush, declaring a chain flushes it, so the chains can then go.
remove_own_chains() {
  local ipt="$1" table script
  command -v "$ipt-save" >/dev/null || return 0
  for table in filter nat mangle raw; do
    script="$("$ipt-save" -t "$table" 2>/dev/null | awk -v own="$OWN_CHAINS" '
      /^:/ { name = substr($1, 2); if (name ~ own) { flush = flush ":" name " - [0:0]\n"; drop = drop "-X " name "\n" } }
      /^-A / && $2 !~ own {
        for (i = 3; i < NF; i++) if (($i == "-j" || $i == "-g") && $(i + 1) ~ own) { sub(/^-A /, "-D "); jumps = jumps $0 "\n"; break }
      }
      END { printf "%s%s%s", flush, jumps, drop }')"
    [[ -n "$script" ]] || continue
    printf '*%s\n%s\nCOMMIT\n' "$table" "$script" | "$ipt-restore" --noflush
  done
}

# mounts_matching REGEX: mount points matching REGEX, the latest first (children before their
# parents, the top of a stack before what it covers).
mounts_matching() {
  awk -v re="$1" '$5 ~ re { print $5 }' /proc/self/mountinfo | tac
}

# unmount_matching REGEX: unmount all of them, lazily if busy; fails if any is left.
unmount_matching() {
  local re="$1" m round
  for round in 1 2 3; do
    for m in $(mounts_matching "$re"); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
    [[ -z "$(mounts_matching "$re")" ]] && return 0
  done
  log "still mounted: $(mounts_matching "$re" | tr '\n' ' ')"
  return 1
}

# The pods' network namespaces (containerd names them cni-*; other namespaces of the machine
# are left alone). Their veth ends go with them; then the bridge.
remove_pod_networks() {
  local ns
  unmount_matching '^/run/netns/cni-'
  for ns in /run/netns/cni-*; do [[ -e "$ns" ]] && rm -f "$ns"; done
  if ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then ip link del "$CNI_BRIDGE"; fi
  # libcni's cache of results, under the name of the pod network and of containerd's loopback.
  rm -f /var/lib/cni/results/ascend-test-* /var/lib/cni/results/cni-loopback-*
  rmdir --ignore-fail-on-non-empty /var/lib/cni/results /var/lib/cni 2>/dev/null || true
}

# remove_tree DIR: rm -rf DIR, but never through a mount (a kubelet subPath is a bind mount of
# a host directory: deleting through it would delete the host's files).
remove_tree() {
  local dir="$1"
  unmount_matching "^$dir(/|\$)" || die "not removing $dir: mounts are left under it"
  rm -rf --one-file-system "$dir"
}
