#!/usr/bin/env bash
# Install, from Debian's package registry, what the monitoring tier runs: the Prometheus server
# and promtool (package prometheus: /usr/bin/prometheus, /usr/bin/promtool). Idempotent and quiet:
# a machine that has both installs nothing and asks no registry. The package's own service is
# not started (policy-rc.d), the tier runs its own server on a free port.
set -euo pipefail

if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
  exit 0
fi
[[ "$(id -u)" -eq 0 ]] || { echo "not root: cannot apt-get install prometheus" >&2; exit 3; }
command -v apt-get >/dev/null 2>&1 || { echo "no apt-get: not a Debian machine" >&2; exit 3; }

export DEBIAN_FRONTEND=noninteractive
# No daemon started by the package's maintainer scripts (a container has no init to ask anyway).
policy=/usr/sbin/policy-rc.d
made_policy=0
if [[ ! -e "$policy" ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 0755 "$policy" && made_policy=1
fi
trap '[[ $made_policy -eq 1 ]] && rm -f "$policy"' EXIT
# The package lists may be absent on a fresh machine, or too old to name current versions.
if ! apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
