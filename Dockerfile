# One image for the three services (dcmi-exporter, ascend-device-plugin, fault-manager).
# Build stage: wheels of the workspace and its pinned dependencies. Final stage: no compilers,
# a non-root user by default (the exporter and the plugin run as root in their DaemonSets,
# where the chip library and the kubelet's directory need it).
FROM python:3.11-slim AS build
WORKDIR /src
COPY requirements-dev.txt pyproject.toml ./
COPY libs ./libs
COPY services ./services
RUN python -m pip wheel --no-cache-dir --wheel-dir /wheels \
        ./libs/common ./services/dcmi-exporter ./services/device-plugin ./services/fault-manager \
        fastapi==0.165.0 uvicorn==0.54.0 httpx==0.28.1 pydantic==2.14.4 pydantic-settings==2.16.3 \
        prometheus-client==0.26.0 PyYAML==6.0.4 grpcio==1.85.3 protobuf==7.36.2 kubernetes==37.0.2 \
        sqlmodel==0.0.50 SQLAlchemy==2.1.9

FROM python:3.11-slim
COPY --from=build /wheels /wheels
RUN python -m pip install --no-cache-dir --no-index --find-links /wheels \
        ascend-common dcmi-exporter ascend-device-plugin fault-manager \
    && rm -rf /wheels \
    && useradd --system --uid 10001 --no-create-home ascend
USER 10001
# The DaemonSets choose the command: dcmi-exporter, ascend-device-plugin or fault-manager.
CMD ["dcmi-exporter", "--help"]
