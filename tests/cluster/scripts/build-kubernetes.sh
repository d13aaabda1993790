#!/usr/bin/env bash
# Build the Kubernetes 1.20 binaries of the cluster tier from Debian's source package, once:
# the result is cached under ${XDG_CACHE_HOME:-~/.cache}/ascend-node-stack/kubernetes/<version>/bin
# and a second run prints that directory without building anything. The prepared source tree is
# kept in .../kubernetes/source: the admission benchmark builds its harness around the kubelet's
# device manager there (bench/admission.py).
#   build-kubernetes.sh          build (if needed) and print the bin directory
#   build-kubernetes.sh --source also make sure the source tree is there (a cache from before it
#                                was kept has only the binaries)
set -euo pipefail
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/ascend-node-stack/kubernetes"
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
log() { echo "build-kubernetes: $*" >&2; }

have_all() {
  local dir="$1" b
  for b in "${BINARIES[@]}"; do [[ -x "$dir/$b" ]] || return 1; done
}

want_source=false
[[ "${1:-}" == "--source" ]] && want_source=true
tree="$CACHE/source"
have_source() { [[ -f "$tree/.prepared" ]]; }

# A finished build is marked by its stamp; a half-finished one is rebuilt.
built=""
for stamp in "$CACHE"/*/bin/.complete; do
  [[ -f "$stamp" ]] || continue
  if have_all "$(dirname "$stamp")"; then built="$(dirname "$stamp")"; break; fi
done
if [[ -n "$built" ]] && { ! $want_source || have_source; }; then echo "$built"; exit 0; fi

export DEBIAN_FRONTEND=noninteractive
if [[ ! -f /etc/apt/sources.list.d/ascend-deb-src.sources ]]; then
  # Debian's kubernetes source package is only reachable through a deb-src entry.
  sed -e 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
    >/etc/apt/sources.list.d/ascend-deb-src.sources
  apt-get update -qq
fi
apt-get install -y -qq --no-install-recommends dpkg-dev golang-1.19-go golang-github-modern-go-reflect2-dev \
  rsync make gcc libc6-dev >/dev/null

if ! have_source; then
  work="$CACHE/src"
  rm -rf "$work" "$tree"; mkdir -p "$work"; cd "$work"
  log "fetching the source package"
  apt-get source -qq --download-only kubernetes >/dev/null
  dpkg-source -q --no-check -x ./kubernetes_*.dsc src >/dev/null
  # The vendored reflect2 1.0.1 crashes at run time under Go >= 1.18; Debian's 1.0.2 does not.
  rm -rf src/vendor/github.com/modern-go/reflect2
  cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 src/vendor/github.com/modern-go/reflect2
  sed -i 's#^github.com/modern-go/reflect2 v1.0.1#github.com/modern-go/reflect2 v1.0.2#' src/vendor/modules.txt || true
  mv src "$tree"
  cd /; rm -rf "$work"
  touch "$tree/.prepared"
fi
if [[ -n "$built" ]]; then echo "$built"; exit 0; fi
cd "$tree"
version="$(dpkg-parsechangelog -S Version | cut -d- -f1)"   # e.g. 1.20.2

export PATH="/usr/lib/go-1.19/bin:$PATH" GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0 \
  KUBE_STATIC_OVERRIDES=kubelet GOFLAGS=-mod=vendor
unset GOPATH GOCACHE
# The build scripts read the version from git or from these variables.
export KUBE_GIT_VERSION="v$version" KUBE_GIT_TREE_STATE=clean KUBE_GIT_COMMIT=debian
log "building v$version (about 5 min cold on 2 cores)"
make -s gen_openapi >/dev/null
targets=()
for b in "${BINARIES[@]}"; do targets+=("cmd/$b"); done
hack/make-rules/build.sh "${targets[@]}" >&2

out="$CACHE/$version/bin"
mkdir -p "$out"
for b in "${BINARIES[@]}"; do install -m 0755 "_output/local/bin/linux/amd64/$b" "$out/$b"; done
# The pause image of the cluster is built from these sources too.
install -m 0644 build/pause/linux/pause.c "$out/pause.c"
touch "$out/.complete"
rm -rf _output  # the binaries are installed; the build cache keeps the compiled packages
echo "$out"
