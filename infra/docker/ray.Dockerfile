# A Ray node of a dicesweep cluster (head or worker; KubeRay's pods or compose's
# services): the project with its training extra (torch, transformers, Ray Tune,
# MLflow's client) and ray[default] (the head's dashboard and Jobs API).
# Built offline from the wheelhouse `make wheels` prepares; CPU torch by default. The
# CUDA variant is the same file built from a wheelhouse holding a CUDA torch
# (`make wheels TORCH_INDEX=https://download.pytorch.org/whl/cu128 WHEELS=infra/docker/wheels-cuda`,
# then --build-arg WHEELS=wheels-cuda, tag `-cuda`):
# PyTorch's CUDA wheels carry their CUDA libraries, and the node's NVIDIA container
# runtime supplies the driver.
FROM debian:bookworm-slim AS build
COPY python-base.sh /tmp/
RUN sh /tmp/python-base.sh
# The wheelhouse: `wheels` (CPU torch), or another folder of the context holding a CUDA
# torch (--build-arg WHEELS=wheels-cuda).
ARG WHEELS=wheels
COPY ${WHEELS} /wheels
ARG DICESWEEP_VERSION=0.1.0
RUN python3 -m venv /opt/dicesweep \
    && /opt/dicesweep/bin/pip install --no-index --find-links /wheels --no-cache-dir \
        "dicesweep[train,service]==${DICESWEEP_VERSION}" boto3

FROM debian:bookworm-slim
COPY python-base.sh /tmp/
RUN sh /tmp/python-base.sh && rm /tmp/python-base.sh \
    && useradd --uid 1000 --create-home --shell /bin/bash ray \
    && mkdir -p /shared /data && chown ray:ray /shared
COPY --from=build /opt/dicesweep /opt/dicesweep
COPY version-check.sh /usr/local/bin/dicesweep-version-check
ENV PATH=/opt/dicesweep/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    DICESWEEP_HOME=/home/ray/.dicesweep \
    DICESWEEP_DATASETS_DIR=/data \
    DICESWEEP_STORAGE_PATH=/shared/ray-results
USER ray
WORKDIR /home/ray
# The raylet's health (worker or head): the dashboard agent answers on every node.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=5 \
    CMD wget -q -O- http://127.0.0.1:52365/api/local_raylet_healthz | grep -q success
ENTRYPOINT ["tini", "--"]
CMD ["ray", "start", "--help"]
