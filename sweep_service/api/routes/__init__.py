"""One router per resource; ``sweep_service.api.main`` joins them under ``API_PREFIX``."""

API_PREFIX = "/v1"
