#!/usr/bin/env bash
# Build the cluster's pause (pod sandbox) image and import it into containerd's k8s.io
# namespace under the name containerd's sandbox_image gives (localhost/pause:3.2).
# No container registry is reachable here, so the image is made from pause.c of the same
# Kubernetes sources as the binaries, compiled static into an otherwise empty root filesystem.
# Idempotent: does nothing when containerd already has the image.
#   pause-image.sh [BIN_DIR]   BIN_DIR holds pause.c (default: what build-kubernetes.sh prints)
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"

bin="${1:-$(k8s_bin_dir)}"
ctr_k8s() { ctr --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"; }

ctr_k8s images ls -q | grep -qxF "$PAUSE_IMAGE" && exit 0

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/rootfs"
gcc -static -O2 -s -DVERSION=3.2 -o "$work/rootfs/pause" "$bin/pause.c"
(cd "$REPO_DIR" && python3 -m tools.image.docker_archive "$work/rootfs" "$work/pause.tar" \
  --tag "$PAUSE_IMAGE" --entrypoint '["/pause"]' >/dev/null)
ctr_k8s images import "$work/pause.tar" >/dev/null
ctr_k8s images ls -q | grep -qxF "$PAUSE_IMAGE" || die "pause image import did not produce $PAUSE_IMAGE"
