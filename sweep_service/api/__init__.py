"""The REST API of the sweep service (FastAPI); ``create_app`` builds it."""

from sweep_service.api.app import create_app

__all__ = ["create_app"]
