#!/bin/sh
# The MLflow server behind its basic-auth app (docs/deploy.md, docs/mlflow.md), then the
# command given. At the first start a random admin password and Flask secret key are
# made, 0600, in MLFLOW_AUTH_DIR (a volume: later starts reuse them; the API reads the
# admin password from it), never a documented default; MLFLOW_ADMIN_PASSWORD_FILE, when
# set (a Kubernetes Secret), is the admin password instead. Users and permissions live
# in MLFLOW_AUTH_DATABASE_URI (default: SQLite in that folder). Every user but the admin
# starts with no permission: the service grants each owner its own experiment; only the
# admin lists users and roles (sweep_service/mlflow_roster.py).
set -eu
dir=${MLFLOW_AUTH_DIR:-/var/lib/mlflow/auth}
umask 077
mkdir -p "$dir"
new_secret() { python3 -c 'import secrets; print(secrets.token_urlsafe(32))'; }
password_file=${MLFLOW_ADMIN_PASSWORD_FILE:-$dir/admin_password}
if [ ! -s "$password_file" ]; then
    new_secret >"$password_file"
fi
if [ ! -s "$dir/flask_secret_key" ]; then
    new_secret >"$dir/flask_secret_key"
fi
# The config holds the admin password (MLflow reads it only to create the admin in an
# empty user store) and, through the database URI, maybe the database's: 0600.
{
    echo "[mlflow]"
    echo "default_permission = NO_PERMISSIONS"
    echo "database_uri = ${MLFLOW_AUTH_DATABASE_URI:-sqlite:///$dir/basic_auth.db}"
    echo "admin_username = admin"
    echo "admin_password = $(cat "$password_file")"
    # MLflow's basic-auth check, and the users' and roles' lists for the admin only.
    echo "authorization_function = sweep_service.mlflow_roster:authenticate"
} >"$dir/basic_auth.ini"
MLFLOW_AUTH_CONFIG_PATH=$dir/basic_auth.ini
MLFLOW_FLASK_SERVER_SECRET_KEY=$(cat "$dir/flask_secret_key")
export MLFLOW_AUTH_CONFIG_PATH MLFLOW_FLASK_SERVER_SECRET_KEY
exec "$@"
