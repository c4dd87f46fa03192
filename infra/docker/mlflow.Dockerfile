# The MLflow tracking server: PostgreSQL backend (psycopg), artifacts proxied to a
# folder or to S3 (boto3), behind MLflow's basic-auth app (mlflow[auth]; its admin
# password made at the first start by mlflow-auth.sh, in /var/lib/mlflow/auth). Every
# setting is an environment variable MLflow reads (MLFLOW_BACKEND_STORE_URI,
# MLFLOW_ARTIFACTS_DESTINATION, MLFLOW_SERVER_ALLOWED_HOSTS, MLFLOW_S3_ENDPOINT_URL,
# AWS_*), so no password shows in the process list.
# The project's own wheel without its dependencies, for one module: the function the
# basic-auth app authenticates with (sweep_service/mlflow_roster.py, which imports
# MLflow and Flask only), so that only the admin lists users and roles.
FROM debian:bookworm-slim AS build
ARG DICESWEEP_VERSION
COPY python-base.sh /tmp/
RUN sh /tmp/python-base.sh
COPY wheels /wheels
RUN python3 -m venv /opt/mlflow \
    && /opt/mlflow/bin/pip install --no-index --find-links /wheels --no-cache-dir \
        "mlflow[auth]" "psycopg[binary]" boto3 \
    && /opt/mlflow/bin/pip install --no-index --find-links /wheels --no-cache-dir --no-deps \
        "dicesweep==${DICESWEEP_VERSION}" \
    && /opt/mlflow/bin/python -c "import sweep_service.mlflow_roster"

FROM debian:bookworm-slim
COPY python-base.sh /tmp/
RUN sh /tmp/python-base.sh && rm /tmp/python-base.sh \
    && useradd --uid 1000 --create-home mlflow \
    && mkdir -p /var/lib/mlflow/artifacts /var/lib/mlflow/auth \
    && chown -R mlflow:mlflow /var/lib/mlflow && chmod 700 /var/lib/mlflow/auth
COPY --from=build /opt/mlflow /opt/mlflow
COPY mlflow-auth.sh /usr/local/bin/mlflow-auth
# MLFLOW_WORKERS: the server's worker processes (about 280 MB each). uvicorn's
# supervisor kills and restarts a worker that misses its ping for
# --timeout-worker-healthcheck seconds (5 by default): on a loaded 2-core host a busy
# or starting worker misses it for longer, and restarts only add load. 120 s. MLflow's
# job runner (GenAI scorers, trace archival; dicesweep uses none) is off: its eight
# processes took 1.7 GB beside the workers and slowed every start.
ENV PATH=/opt/mlflow/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    MLFLOW_HOST=0.0.0.0 \
    MLFLOW_PORT=5000 \
    MLFLOW_ARTIFACTS_DESTINATION=/var/lib/mlflow/artifacts \
    MLFLOW_WORKERS=2 \
    MLFLOW_UVICORN_OPTS="--timeout-worker-healthcheck 120" \
    MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false
USER mlflow
WORKDIR /home/mlflow
EXPOSE 5000
# Sized for a loaded 2-core host: a start (each worker imports MLflow and opens the
# store) may take minutes, an answer 10 s or more; after the first 5 minutes, 10
# failed checks in a row (about 3 minutes) mark it unhealthy.
HEALTHCHECK --interval=15s --timeout=20s --start-period=300s --retries=10 \
    CMD wget -q -T 20 -O /dev/null http://127.0.0.1:5000/health
ENTRYPOINT ["tini", "--", "mlflow-auth"]
CMD ["mlflow", "server", "--app-name", "basic-auth"]
