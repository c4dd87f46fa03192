"""The dicesweep service: its REST API, store, reconciler and ``dicesweep`` command, and
``Client``, the API from Python (``from sweep_service import Client``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sweep_service.client import Client, Sweep

__all__ = ["Client", "Sweep"]


def __getattr__(name: str) -> Any:
    # Imported when asked for: the service's own modules do not pay for httpx here.
    if name in __all__:
        from sweep_service import client

        return getattr(client, name)
    raise AttributeError(f"module 'sweep_service' has no attribute {name!r}")
