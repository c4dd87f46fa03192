#!/bin/sh
# The official image's start-up, reduced to what the compose file uses.
set -eu
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
USER_NAME=${POSTGRES_USER:-postgres}
DB_NAME=${POSTGRES_DB:-$USER_NAME}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    initdb --username="$USER_NAME" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
        --encoding=UTF8 --locale=C.UTF-8 \
        -D "$PGDATA" >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    if [ "$DB_NAME" != postgres ]; then
        psql -v ON_ERROR_STOP=1 -U "$USER_NAME" -d postgres -c "CREATE DATABASE \"$DB_NAME\"" >/dev/null
    fi
    for script in /docker-entrypoint-initdb.d/*; do
        case "$script" in
            *.sql) psql -v ON_ERROR_STOP=1 -U "$USER_NAME" -d "$DB_NAME" -f "$script" ;;
            *.sh) . "$script" ;;
        esac
    done
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
if [ "$1" = postgres ]; then
    shift
    exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
fi
exec "$@"
