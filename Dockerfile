# One image for the three services (dcmi-exporter, ascend-device-plugin, fault-manager).
# Everything is installed by deploy/image/install.sh, which `./dev image` also runs in a
# debootstrap chroot where no image builder exists; keep the steps there, not here.
# The default user is the unprivileged 10001; each DaemonSet sets the uid it needs (0 for the
# three services: root-owned hostPaths, token files and sockets, with every capability dropped
# except for the real exporter).
FROM python:3.11-slim
COPY libs /src/libs
COPY services /src/services
COPY deploy/image /src/deploy/image
RUN sh /src/deploy/image/install.sh /src && rm -rf /src
ENV PATH=/opt/ascend/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
USER 10001
# The DaemonSets choose the command: dcmi-exporter, ascend-device-plugin or fault-manager.
CMD ["dcmi-exporter", "--help"]
