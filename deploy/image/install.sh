#!/bin/sh
# Install the node stack into an image's root filesystem. The one install script of the image:
# the Dockerfile runs it (on python:3.11-slim) and so does `./dev image` (in a Debian bookworm
# chroot made by debootstrap, where no image builder runs).
#   install.sh SRC    SRC: a copy of the workspace (libs/, services/, deploy/image/)
# Result: the three services' commands in /opt/ascend/bin (a venv, so Debian's
# EXTERNALLY-MANAGED python is left alone), and the system user 10001 the image runs as by
# default. Needs python3 with venv and network access to the package index.
set -eu
SRC="$1"
PREFIX=/opt/ascend

python3 -m venv "$PREFIX"
"$PREFIX/bin/python" -m pip install --no-cache-dir --quiet --disable-pip-version-check \
    -r "$SRC/deploy/image/requirements.txt"
# Our own packages last and without dependencies: theirs are pinned above, and ascend-common
# is a workspace sibling, not a registry package.
"$PREFIX/bin/python" -m pip install --no-cache-dir --quiet --disable-pip-version-check --no-deps \
    "$SRC/libs/common" "$SRC/services/dcmi-exporter" "$SRC/services/device-plugin" "$SRC/services/fault-manager"
# The installers are not needed at run time.
"$PREFIX/bin/python" -m pip uninstall --quiet --yes setuptools pip
find "$PREFIX" -name '__pycache__' -prune -exec rm -rf {} +
"$PREFIX/bin/python" -m compileall -q "$PREFIX/lib" >/dev/null

id -u ascend >/dev/null 2>&1 || useradd --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin ascend
# Fail the build, not the first pod, when a command is missing.
for cmd in dcmi-exporter ascend-device-plugin fault-manager; do "$PREFIX/bin/$cmd" --help >/dev/null; done
