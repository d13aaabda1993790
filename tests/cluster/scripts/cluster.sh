#!/usr/bin/env bash
# Start and stop a real single-node Kubernetes 1.20 cluster on this machine, for the cluster
# test tier: containerd, etcd, the control plane, kube-proxy and a kubelet, all local (the node
# address 10.87.0.1 on lo, pods on the cni0 bridge). Root only; one cluster per machine.
#
#   cluster.sh up               start it, or find it running; print `export` lines on stdout
#   cluster.sh down [--purge]   stop everything and take back every change to the machine;
#                               --purge also deletes certs, imported images and logs
#   cluster.sh status           exit 0 if it runs with the node Ready, else say why, exit 1
#   cluster.sh can-run          exit 0 if this machine can run it, else say why, exit 1
#   cluster.sh restart-kubelet  stop the kubelet, start it again, wait until it reports Ready
#
# `up` after `down` is an empty cluster (etcd's data is in RUN_DIR); the built binaries, the
# certificates and the images imported into containerd are kept. Each component logs to
# $CLUSTER_LOG_DIR/<component>.log (kubelet.log, kube-apiserver.log, containerd.log, ...).
set -euo pipefail
LIB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib"
# shellcheck source=lib/common.sh
source "$LIB/common.sh"
# shellcheck source=lib/pki.sh
source "$LIB/pki.sh"
# shellcheck source=lib/configs.sh
source "$LIB/configs.sh"
# shellcheck source=lib/host.sh
source "$LIB/host.sh"

# In start order; `down` stops the kubelet first and etcd last.
COMPONENTS=(containerd etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet)
PID_DIR="$RUN_DIR/pids"
ETCD_URL=http://127.0.0.1:12379
ETCD_PEER_URL=http://127.0.0.1:12380
BIN=""   # the Kubernetes binaries

# --- processes -------------------------------------------------------------------------------

# start_time PID: when the process started (clock ticks since boot), to tell it from a later
# process given the same pid; nothing for a zombie.
start_time() {
  local stat fields
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  read -ra fields <<<"${stat##*') '}"   # the fields after "pid (comm) ", from the state on
  [[ "${fields[0]}" != Z ]] && echo "${fields[19]}"
}

# spawn NAME CMD...: start CMD detached: in its own session, so that the caller's terminal or
# test runner cannot signal it; stdin closed; output to LOG_DIR/NAME.log; and without fd 9,
# the lock, which a daemon would otherwise hold for its whole life.
spawn() {
  local name="$1"
  shift
  setsid "$@" </dev/null >>"$LOG_DIR/$name.log" 2>&1 9>&- &
  echo "$! $(start_time $!)" >"$PID_DIR/$name"
}

pid_of() {
  local pid started
  [[ -f "$PID_DIR/$1" ]] || return 1
  read -r pid started <"$PID_DIR/$1"
  [[ -n "$started" && "$(start_time "$pid")" == "$started" ]] && echo "$pid"
}

alive() { pid_of "$1" >/dev/null; }

# stop NAME: SIGTERM, then SIGKILL after 10 s.
stop() {
  local name="$1" pid i
  if pid="$(pid_of "$name")"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do alive "$name" || break; sleep 0.1; done
    if alive "$name"; then
      kill -KILL "$pid" 2>/dev/null || true
      while alive "$name"; do sleep 0.1; done
    fi
  fi
  rm -f "$PID_DIR/$name"
}

# standins NAME KEY...: files holding the machine's current value of each /proc/sys/KEY, for
# lib/sysctl-sandbox.sh to mount over them in NAME's own mount namespace.
standins() {
  local dir="$RUN_DIR/sysctl/$1" key
  shift
  rm -rf "$dir"
  mkdir -p "$dir"
  for key in "$@"; do cat "/proc/sys/$key" >"$dir/$(tr / . <<<"$key")"; done
}

# --- components ------------------------------------------------------------------------------

ctrd() { ctr --address "$CONTAINERD_SOCK" "$@"; }
kc() { "$BIN/kubectl" --kubeconfig "$STATE_DIR/admin.kubeconfig" --request-timeout=5s "$@"; }

start_containerd() {
  # Pulls go to a closed port on loopback: whatever image a pod names, the runtime never
  # reaches out of the machine (no registry is reachable anyway; this fails at once).
  spawn containerd env HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 \
    containerd --config "$RUN_DIR/containerd.toml"
}

# Not on etcd's usual ports: Debian's etcd-server may run its own etcd there.
start_etcd() {
  spawn etcd etcd --name ascend-test --data-dir "$RUN_DIR/etcd" --logger zap \
    --listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
    --listen-peer-urls "$ETCD_PEER_URL" --initial-advertise-peer-urls "$ETCD_PEER_URL" \
    --initial-cluster "ascend-test=$ETCD_PEER_URL"
}

# On the node address, so that the `kubernetes` Service's endpoint (the advertised address) is
# reachable from pods, through kube-proxy's rules. The audit log (writes, who and what, no
# bodies) lets the drills prove which identity wrote an object; it also has the stack's own pod
# reads (get, list, watch by the plugin's and the fault-manager's accounts), so that a drill can
# prove that with --pod-source kubelet there are none.
start_apiserver() {
  cat >"$RUN_DIR/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete]
  - level: Metadata
    verbs: [get, list, watch]
    resources: [{group: "", resources: [pods]}]
    users:
      - system:serviceaccount:ascend-system:ascend-device-plugin
      - system:serviceaccount:ascend-system:fault-manager
  - level: None
POLICY
  : >"$LOG_DIR/audit.log"
  spawn kube-apiserver "$BIN/kube-apiserver" \
    --audit-policy-file="$RUN_DIR/audit-policy.yaml" --audit-log-path="$LOG_DIR/audit.log" \
    --etcd-servers="$ETCD_URL" \
    --bind-address="$NODE_IP" --advertise-address="$NODE_IP" --secure-port=6443 \
    --tls-cert-file="$PKI_DIR/apiserver.crt" --tls-private-key-file="$PKI_DIR/apiserver.key" \
    --client-ca-file="$PKI_DIR/ca.crt" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --allow-privileged=true \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --service-account-key-file="$PKI_DIR/sa.pub" \
    --service-account-signing-key-file="$PKI_DIR/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --kubelet-client-certificate="$PKI_DIR/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI_DIR/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$PKI_DIR/ca.crt" \
    --kubelet-preferred-address-types=InternalIP
}

# The controller-manager makes the ServiceAccount tokens; both serve on loopback only. Its
# flex-volume dir is the kubelet's, which down removes (by default it makes one in /usr/libexec).
start_controller_manager() {
  local kubeconfig="$RUN_DIR/controller-manager.kubeconfig"
  spawn kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$kubeconfig" --authentication-kubeconfig="$kubeconfig" \
    --authorization-kubeconfig="$kubeconfig" \
    --bind-address=127.0.0.1 --port=0 --leader-elect=false \
    --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI_DIR/sa.key" --root-ca-file="$PKI_DIR/ca.crt" \
    --cluster-signing-cert-file="$PKI_DIR/ca.crt" --cluster-signing-key-file="$PKI_DIR/ca.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --flex-volume-plugin-dir=/var/lib/kubelet/volume-plugins
}

start_scheduler() {
  local kubeconfig="$RUN_DIR/scheduler.kubeconfig"
  spawn kube-scheduler "$BIN/kube-scheduler" \
    --kubeconfig="$kubeconfig" --authentication-kubeconfig="$kubeconfig" \
    --authorization-kubeconfig="$kubeconfig" \
    --bind-address=127.0.0.1 --port=0 --leader-elect=false
}

# kube-proxy sets route_localnet at start, which must not change on the shared machine.
start_kube_proxy() {
  standins kube-proxy net/ipv4/conf/all/route_localnet
  spawn kube-proxy unshare --mount --propagation unchanged \
    "$LIB/sysctl-sandbox.sh" "$RUN_DIR/sysctl/kube-proxy" \
    "$BIN/kube-proxy" --config="$RUN_DIR/kube-proxy.yaml"
}

# The 1.20 kubelet refuses to start unless it can set these kernel settings, which are the
# shared machine's: it gets stand-ins in its own mount namespace. It mounts pods' volumes there,
# so /var/lib/kubelet is a shared mount: they reach containerd, in the machine's namespace.
# At start it also asks cloud metadata services (169.254.169.254) for credentials and for
# whether it runs on GCE: the variables turn the first off and send the second to a closed port
# on loopback, so that nothing leaves the machine.
start_kubelet() {
  mkdir -p /var/lib/kubelet
  mountpoint -q /var/lib/kubelet || mount --bind /var/lib/kubelet /var/lib/kubelet
  mount --make-rshared /var/lib/kubelet
  standins kubelet vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops \
    kernel/keys/root_maxkeys kernel/keys/root_maxbytes
  spawn kubelet env AWS_EC2_METADATA_DISABLED=true GCE_METADATA_HOST=127.0.0.1:9 \
    unshare --mount --propagation unchanged "$LIB/sysctl-sandbox.sh" "$RUN_DIR/sysctl/kubelet" \
    "$BIN/kubelet" --config="$RUN_DIR/kubelet/config.yaml" \
    --kubeconfig="$RUN_DIR/kubelet/kubeconfig" \
    --container-runtime=remote --container-runtime-endpoint="unix://$CONTAINERD_SOCK" \
    --node-ip="$NODE_IP" --hostname-override="$NODE_NAME"
}

# --- checks ----------------------------------------------------------------------------------

# node_ready SINCE: the node is Ready, by a heartbeat at or after epoch second SINCE.
node_ready() {
  local out status beat
  out="$(kc get node "$NODE_NAME" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}')"
  read -r status beat <<<"$out"
  [[ "$status" == True ]] && (($(date -d "$beat" +%s) >= $1))
}

# Schedulable and without taints (the not-ready taint goes some seconds after Ready).
node_schedulable() {
  [[ "$(kc get node "$NODE_NAME" -o jsonpath='{.metadata.name}|{.spec.taints}{.spec.unschedulable}')" == "$NODE_NAME|" ]]
}

# Pods cannot be created in a namespace before its default ServiceAccount has its token.
default_token_ready() {
  [[ -n "$(kc -n default get serviceaccount default -o jsonpath='{.secrets[0].name}')" ]]
}

# check_up: 0 if every component runs and the node is Ready, else say why on stdout.
check_up() {
  local c
  [[ -f "$RUN_DIR/bin" ]] || { echo "the test cluster is not up"; return 1; }
  for c in "${COMPONENTS[@]}"; do
    alive "$c" || { echo "$c is not running (see $LOG_DIR/$c.log)"; return 1; }
  done
  BIN="$(<"$RUN_DIR/bin")"
  node_ready 0 2>/dev/null || { echo "node $NODE_NAME is not Ready (see $LOG_DIR/kubelet.log)"; return 1; }
}

# fail_with_log MESSAGE COMPONENT
fail_with_log() {
  log "$1; the last lines of $LOG_DIR/$2.log:"
  tail -n 40 "$LOG_DIR/$2.log" 2>/dev/null | sed 's/^/  | /' >&2
  exit 1
}

# wait_for SECONDS COMPONENT WHAT CHECK...: poll CHECK until it passes; fail with COMPONENT's log
# if it does not within SECONDS, or with the log of any started component that exited.
wait_for() {
  local seconds="$1" component="$2" what="$3" c
  shift 3
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    for c in "${COMPONENTS[@]}"; do
      if [[ -f "$PID_DIR/$c" ]] && ! alive "$c"; then fail_with_log "$c exited (waiting for $what)" "$c"; fi
    done
    ((SECONDS < deadline)) || fail_with_log "no $what after ${seconds}s" "$component"
    sleep 0.5
  done
}

# can_run_reason: 0 if this machine can run the cluster, else say why on stdout.
can_run_reason() {
  local memory probe
  [[ "$(uname -m)" == x86_64 ]] || { echo "not x86_64 (the Kubernetes build is linux/amd64)"; return 1; }
  ((EUID == 0)) || { echo "not root"; return 1; }
  unshare --mount true 2>/dev/null || { echo "'unshare --mount' fails (no CAP_SYS_ADMIN)"; return 1; }
  if ! ip -4 addr show dev lo | grep -qF " $NODE_IP/32 "; then
    ip addr add "$NODE_IP/32" dev lo 2>/dev/null || { echo "cannot add an address to lo (no CAP_NET_ADMIN)"; return 1; }
    ip addr del "$NODE_IP/32" dev lo
  fi
  # Containers get cgroups: the memory controller must be mounted and writable.
  if [[ -d /sys/fs/cgroup/memory ]]; then memory=/sys/fs/cgroup/memory
  elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then memory=/sys/fs/cgroup
  else echo "no memory cgroup controller mounted"; return 1
  fi
  probe="$memory/ascend-test-cluster-probe.$$"
  { mkdir "$probe" && rmdir "$probe"; } 2>/dev/null || { echo "cannot create cgroups under $memory"; return 1; }
}

# --- up, down --------------------------------------------------------------------------------

take_lock() {
  exec 9>"$LOCK_FILE"
  flock -w 1800 9 || die "another cluster.sh held $LOCK_FILE for 30 min"
}

env_lines() {
  printf 'export %s=%q\n' KUBECONFIG "$STATE_DIR/admin.kubeconfig" CLUSTER_NODE_NAME "$NODE_NAME" \
    CLUSTER_NODE_IP "$NODE_IP" CLUSTER_BIN "$BIN" CLUSTER_LOG_DIR "$LOG_DIR" \
    CLUSTER_AUDIT_LOG "$LOG_DIR/audit.log"
}

# A failed `up` leaves nothing running; the logs stay.
teardown_failed_up() {
  local rc=$?
  ((rc == 0)) && return
  log "up failed: tearing down (logs in $LOG_DIR)"
  teardown
  exit "$rc"
}

cmd_up() {
  local started=$SECONDS
  take_lock
  if check_up >/dev/null; then env_lines; return; fi
  # Whatever a previous cluster left (a crash, an interrupted up) goes before a fresh start.
  if [[ -d "$RUN_DIR" ]]; then log "a previous cluster is not healthy ($(check_up)): tearing it down"; fi
  teardown
  "$SCRIPTS_DIR/install-packages.sh"
  BIN="$(k8s_bin_dir)"
  mkdir -p "$PID_DIR" "$LOG_DIR"
  rm -f "$LOG_DIR"/*.log
  trap teardown_failed_up EXIT
  echo "$BIN" >"$RUN_DIR/bin"
  ensure_pki
  write_configs
  add_node_address
  setup_forwarding

  log "starting containerd and etcd"
  start_containerd
  start_etcd
  wait_for 30 containerd "containerd" ctrd version
  "$SCRIPTS_DIR/pause-image.sh" "$BIN"
  wait_for 30 etcd "healthy etcd" curl -fsS "$ETCD_URL/health"
  log "starting the control plane, kube-proxy and the kubelet"
  start_apiserver
  # These two wait for the apiserver by themselves, and the kubelet's first seconds go to
  # probing for docker: their start overlaps the apiserver's. The controller-manager would give
  # up on an apiserver not healthy within 10 s.
  start_kube_proxy
  start_kubelet
  wait_for 60 kube-apiserver "ready apiserver" kc get --raw=/readyz
  start_controller_manager
  start_scheduler
  wait_for 120 kubelet "Ready node $NODE_NAME" node_ready 0
  wait_for 60 kube-controller-manager "token of the default ServiceAccount" default_token_ready
  wait_for 60 kube-controller-manager "taint-free node" node_schedulable

  env_lines >"$STATE_DIR/env.sh"
  trap - EXIT
  log "up in $((SECONDS - started)) s"
  env_lines
}

# Every container of the runtime, pod sandboxes included: killed and deleted with its snapshot
# through containerd while it runs; what is left, through runc, whose state containerd keeps.
remove_containers() {
  local ns id
  if alive containerd; then
    for ns in $(ctrd namespaces ls -q); do
      for id in $(ctrd -n "$ns" containers ls -q); do
        ctrd -n "$ns" tasks delete --force "$id" >/dev/null 2>&1 || true
        ctrd -n "$ns" containers delete "$id" >/dev/null 2>&1 || true
      done
    done
  fi
  for ns in /run/containerd/runc/*; do
    [[ -d "$ns" ]] || continue
    for id in $(runc --root "$ns" list -q 2>/dev/null); do
      runc --root "$ns" delete --force "$id" >/dev/null 2>&1 || true
    done
  done
}

# Shims outliving containerd: this cluster's are the shim binary with its socket as -address.
kill_shims() {
  local p
  for p in /proc/[0-9]*; do
    [[ "$(readlink "$p/exe" 2>/dev/null)" == /usr/bin/containerd-shim-runc-v2 ]] || continue
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "-address $CONTAINERD_SOCK " || continue
    kill -KILL "${p#/proc/}" 2>/dev/null || true
  done
}

teardown() {
  local c
  stop kubelet
  remove_containers
  stop containerd
  kill_shims
  for c in kube-proxy kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$c"; done
  remove_pod_networks
  remove_own_chains iptables
  remove_own_chains ip6tables
  restore_forwarding
  remove_node_address
  remove_tree /var/lib/kubelet
  remove_tree /run/containerd
  # The kubelet's container logs (fixed paths in 1.20) and the runtime's record of pods.
  rm -rf /var/log/pods /var/log/containers \
    "$CONTAINERD_ROOT/io.containerd.grpc.v1.cri/sandboxes" "$CONTAINERD_ROOT/io.containerd.grpc.v1.cri/containers"
  remove_tree "$RUN_DIR"
}

cmd_down() {
  case "${1:-}" in "" | --purge) ;; *) die "usage: cluster.sh down [--purge]" ;; esac
  take_lock
  teardown
  if [[ "${1:-}" == --purge ]]; then remove_tree "$STATE_DIR"; fi
}

# Done when the new kubelet serves, has posted Ready after its first seconds (its first status
# may say NotReady) and the node has no not-ready taint left: pods can be scheduled again.
cmd_restart_kubelet() {
  local settled
  take_lock
  [[ -f "$RUN_DIR/bin" ]] || die "the test cluster is not up"
  BIN="$(<"$RUN_DIR/bin")"
  stop kubelet
  start_kubelet
  wait_for 60 kubelet "kubelet health after the restart" curl -fsS http://127.0.0.1:10248/healthz
  settled=$(($(date +%s) + 2))
  wait_for 30 kubelet "Ready node $NODE_NAME after the restart" node_ready "$settled"
  wait_for 30 kube-controller-manager "taint-free node after the restart" node_schedulable
}

case "${1:-}" in
  up | down | restart-kubelet) ((EUID == 0)) || die "$1 needs root" ;;&
  up) cmd_up ;;
  down) cmd_down "${@:2}" ;;
  restart-kubelet) cmd_restart_kubelet ;;
  status) check_up ;;
  can-run)
    why="$(can_run_reason)" || { echo "cannot run the test cluster here: $why"; exit 1; }
    ;;
  *)
    sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
