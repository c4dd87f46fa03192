"""MLflow's basic-auth app with its roster closed to everyone but its admins.

MLflow lets every user list every user (``users/list``: each owner's name) and, for a
workspace the user has a role in, every role and each role's grants (``roles/list``,
``roles/get``, ``roles/permissions/list``: which experiment, model and prompt is whose).
MLflow has no setting that closes these routes, but its basic-auth app takes the
function that authenticates each request from its own configuration
(``authorization_function`` in the file ``MLFLOW_AUTH_CONFIG_PATH`` names): this one is
MLflow's basic-auth check, then a 403 to a user who is not an admin on those routes.
Owners never need them; the service signs in as the admin.

Every place the project runs MLflow names it: ``dicesweep ui`` and the tests
(``mlflow_auth_server``), and the MLflow image (``infra/docker/mlflow-auth.sh``), which
installs this package without its dependencies for this module alone: it imports
MLflow and Flask only.
"""

from __future__ import annotations

from flask import Response, request
from mlflow.server.auth import (
    authenticate_request_basic_auth,
    make_forbidden_response,
    routes,
    store,
)
from mlflow.server.auth.entities import User
from werkzeug.datastructures import Authorization

ROSTER_ROUTES = frozenset(
    path
    for name in ("LIST_USERS", "LIST_ROLES", "GET_ROLE", "LIST_ROLE_PERMISSIONS", "LIST_ROLE_USERS")
    for path in (getattr(routes, name), getattr(routes, f"AJAX_{name}"))
)
"""The routes that list users, roles or a role's grants and users (REST and ajax).
A user's own roles and permissions (``users/roles/list``, ``users/permissions/list``
for oneself) stay open: MLflow already refuses them for another user."""


def authenticate() -> Authorization | Response:
    """MLflow's basic-auth answer for this request; a 403 instead where a user who is
    not an admin asks for a roster route."""
    authorization = authenticate_request_basic_auth()
    if isinstance(authorization, Response) or not _asks_for_roster():
        return authorization
    user: User = store.get_user(authorization.username or "")
    return authorization if user.is_admin else make_forbidden_response()


def _asks_for_roster() -> bool:
    rule = request.url_rule
    return request.path in ROSTER_ROUTES or (rule is not None and rule.rule in ROSTER_ROUTES)
