# A stand-in for the official `postgres` image where no registry can be reached (CI
# here): Debian's PostgreSQL 15, honouring the official image's settings that the
# compose file uses: POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB, the data folder
# /var/lib/postgresql/data and init scripts (*.sql, *.sh) in /docker-entrypoint-initdb.d,
# run once on an empty data folder. Only docker-compose.ci.yml uses it.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends postgresql-15 tini \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/postgresql/data /docker-entrypoint-initdb.d /var/run/postgresql \
    && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
USER postgres
EXPOSE 5432
ENTRYPOINT ["tini", "--", "docker-entrypoint.sh"]
CMD ["postgres"]
