"""Image building without an image builder: a root filesystem made by debootstrap and the
project's install script, packed as a docker-archive that containerd and podman import."""
