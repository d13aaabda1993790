# shellcheck shell=bash
# The configuration files of the cluster's components (sourced by cluster.sh, after common.sh
# and pki.sh). All are written under RUN_DIR by every `up`, so they always match this script.

CNI_CONF_DIR="$RUN_DIR/cni/net.d"

write_containerd_config() {
  mkdir -p "$CONTAINERD_ROOT" "$CNI_CONF_DIR"
  cat >"$RUN_DIR/containerd.toml" <<EOF
version = 2
root = "$CONTAINERD_ROOT"
state = "/run/containerd"
# opt would install into /opt/containerd, outside the cluster's own directories.
disabled_plugins = ["io.containerd.internal.v1.opt"]

[grpc]
  address = "$CONTAINERD_SOCK"

[plugins."io.containerd.grpc.v1.cri"]
  # No registry is reachable: the sandbox image is built and imported locally.
  sandbox_image = "$PAUSE_IMAGE"
  # Without CAP_SYS_RESOURCE here, the kubelet's negative OOM scores would fail every pod.
  restrict_oom_score_adj = true
  # exec, attach and port-forward streams stay on loopback (the kubelet proxies them).
  stream_server_address = "127.0.0.1"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"

    # crun fails on this machine's hybrid cgroup v1; runc with cgroupfs (as the kubelet) works.
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"   # Debian's containernetworking-plugins
    conf_dir = "$CNI_CONF_DIR"
    max_conf_num = 1
EOF
}

# One bridge for all pods, addresses from host-local. containerd adds the pods' loopback itself
# (with the loopback plugin of bin_dir). No ipMasq: pod traffic is never meant to leave the machine.
write_cni_config() {
  cat >"$CNI_CONF_DIR/10-ascend-test.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "ascend-test",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$RUN_DIR/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}

write_kubelet_config() {
  mkdir -p "$RUN_DIR/kubelet"
  write_kubeconfig "$RUN_DIR/kubelet/kubeconfig" "kubelet-$NODE_NAME"
  # Pods get no name server of the machine's (theirs is elsewhere on the network): a lookup
  # fails at once on the pod's own loopback. Nothing in the cluster needs DNS; the apiserver
  # is found through KUBERNETES_SERVICE_HOST. (With no name server at all, containerd would
  # copy the machine's.)
  echo "nameserver 127.0.0.1" >"$RUN_DIR/kubelet/resolv.conf"
  cat >"$RUN_DIR/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $PKI_DIR/kubelet-$NODE_NAME-serving.crt
tlsPrivateKeyFile: $PKI_DIR/kubelet-$NODE_NAME-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI_DIR/ca.crt}
authorization: {mode: Webhook}
resolvConf: $RUN_DIR/kubelet/resolv.conf
# cgroup v1 through cgroupfs, as containerd's runc; no QoS or allocatable cgroups, which this
# sandbox cannot set up.
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
# No CAP_SYS_RESOURCE: the kubelet cannot lower its own OOM score.
oomScoreAdj: 0
makeIPTablesUtilChains: false
# The first status after a start says NotReady (no pod lifecycle relist yet): post every second,
# so that Ready follows in a second, not ten (restart-kubelet waits for that Ready).
nodeStatusUpdateFrequency: 1s
nodeStatusReportFrequency: 1s
# A shared machine's disk and memory may be well used: evict only when nearly out, and never
# garbage-collect images (they were imported by hand and cannot be pulled again).
evictionHard: {memory.available: "1%", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Inside the kubelet's root, which down removes, instead of /usr/libexec.
volumePluginDir: /var/lib/kubelet/volume-plugins
EOF
}

write_kube_proxy_config() {
  write_kubeconfig "$RUN_DIR/kube-proxy.kubeconfig" kube-proxy
  cat >"$RUN_DIR/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $RUN_DIR/kube-proxy.kubeconfig}
mode: iptables
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE_NAME
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# NodePorts on the node address only, never on the machine's outward interfaces.
nodePortAddresses: [$NODE_IP/32]
# 0: leave the machine's conntrack limits and timeouts as they are.
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

write_configs() {
  mkdir -p "$RUN_DIR"
  write_kubeconfig "$STATE_DIR/admin.kubeconfig" admin
  write_kubeconfig "$RUN_DIR/controller-manager.kubeconfig" controller-manager
  write_kubeconfig "$RUN_DIR/scheduler.kubeconfig" scheduler
  write_containerd_config
  write_cni_config
  write_kubelet_config
  write_kube_proxy_config
}
