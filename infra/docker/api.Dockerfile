# The REST API and its pages (`dicesweep serve`): no torch. It submits each sweep's
# driver to the cluster's Jobs API (DICESWEEP_RAY_JOBS_URL) and never joins the cluster.
FROM debian:bookworm-slim AS build
COPY python-base.sh /tmp/
RUN sh /tmp/python-base.sh
COPY wheels /wheels
ARG DICESWEEP_VERSION=0.1.0
RUN python3 -m venv /opt/dicesweep \
    && /opt/dicesweep/bin/pip install --no-index --find-links /wheels --no-cache-dir \
        "dicesweep[service]==${DICESWEEP_VERSION}"

FROM debian:bookworm-slim
COPY python-base.sh /tmp/
RUN sh /tmp/python-base.sh && rm /tmp/python-base.sh \
    && useradd --uid 1000 --create-home dicesweep
COPY --from=build /opt/dicesweep /opt/dicesweep
COPY version-check.sh /usr/local/bin/dicesweep-version-check
ENV PATH=/opt/dicesweep/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    DICESWEEP_HOME=/home/dicesweep/.dicesweep \
    DICESWEEP_HOST=0.0.0.0 \
    DICESWEEP_PORT=8000 \
    DICESWEEP_DATASETS_DIR=/data
USER dicesweep
WORKDIR /home/dicesweep
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=5 \
    CMD wget -q -O /dev/null http://127.0.0.1:8000/healthz
ENTRYPOINT ["tini", "--"]
CMD ["dicesweep", "serve"]
