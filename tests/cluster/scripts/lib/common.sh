# shellcheck shell=bash
# Settings and helpers shared by cluster.sh and pause-image.sh (sourced, not run).
# One cluster per machine: the containerd socket, /var/lib/kubelet and the bridge are fixed paths.

SCRIPTS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPO_DIR="$(cd "$SCRIPTS_DIR/../../.." && pwd)"

STATE_DIR=/var/lib/ascend-test-cluster   # kept by `down`: certs, kubeconfigs, image store, logs
RUN_DIR=/run/ascend-test-cluster         # removed by `down`: pids, configs, etcd data, CNI state
LOG_DIR="$STATE_DIR/log"                 # one <component>.log each, emptied by `up`
PKI_DIR="$STATE_DIR/pki"
LOCK_FILE=/run/ascend-test-cluster.lock  # outside RUN_DIR, which `down` removes

NODE_NAME="${CLUSTER_NODE_NAME:-ascend-node}"
NODE_IP=10.87.0.1            # an extra address on lo: the kubelet rejects a loopback node IP
POD_CIDR=10.244.0.0/16       # the bridge's host-local range (podman's are 10.88/16 and 10.89/16)
SERVICE_CIDR=10.96.0.0/12
API_SERVICE_IP=10.96.0.1     # the `kubernetes` Service
CNI_BRIDGE=cni0
PAUSE_IMAGE=localhost/pause:3.2   # built locally (pause-image.sh); containerd's sandbox_image
CONTAINERD_SOCK=/run/containerd/containerd.sock
CONTAINERD_ROOT="$STATE_DIR/containerd"   # kept, so imported images survive `down`

log() { echo "cluster: $*" >&2; }
die() { log "$*"; exit 1; }

# The Kubernetes binaries; built once and cached by build-kubernetes.sh, which prints their dir.
k8s_bin_dir() { "$SCRIPTS_DIR/build-kubernetes.sh"; }
