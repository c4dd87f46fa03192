"""Whether a trial's ``model`` can be loaded, said in one line before any data is read.

Without it, a hub id that cannot load (offline and not in the Hugging Face cache)
would fail only after the data is read and tokenised, in transformers' many-line
``OSError``; the check costs a look in the cache, or one small download (the model's
config).
"""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

from search_spaces.checks import TINY_BERT

HUB_TIMEOUT_S = 10  # one config file: a hub that does not answer in this is unreachable
USE_INSTEAD = "use 'tiny-bert', a local folder of a saved model, or a hub id once online"


class ModelUnavailableError(ValueError):
    """The ``model`` field names nothing that can be loaded; the message says what was
    tried."""


def check_model(model: str) -> None:
    """Pass when ``model`` can be loaded: ``tiny-bert``, a folder holding a saved
    transformers model (its ``config.json``), or a hub id whose config is in the
    Hugging Face cache or downloads.

    Raises:
        ModelUnavailableError: "model: 'bert-base-cased' is not a folder here nor in the
            Hugging Face cache (/home/me/.cache/huggingface/hub), and HF_HUB_OFFLINE is
            set; use 'tiny-bert', ...".
    """
    if model == TINY_BERT:
        return
    folder = Path(model).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise ModelUnavailableError(
                f"model: the folder {folder} holds no config.json, as a saved "
                f"transformers model does; {USE_INSTEAD}"
            )
        return
    if model.startswith((".", "/", "~")):  # meant as a folder: a hub id is org/name
        raise ModelUnavailableError(f"model: no folder {model!r} here; {USE_INSTEAD}")
    _check_hub_id(model)


def _check_hub_id(model: str) -> None:
    """Pass when the hub id ``model``'s config is cached or downloads (``check_model``)."""
    from huggingface_hub import constants, hf_hub_download, try_to_load_from_cache

    tried = f"model: {model!r} is not a folder here nor in the Hugging Face cache "
    tried += f"({constants.HF_HUB_CACHE})"
    try:
        cached = try_to_load_from_cache(model, "config.json")
    except ValueError as invalid:  # not a repository id at all (HFValidationError)
        raise ModelUnavailableError(f"model: {model!r} is no folder and {invalid}") from None
    if isinstance(cached, str):
        return
    if constants.HF_HUB_OFFLINE:
        raise ModelUnavailableError(f"{tried}, and HF_HUB_OFFLINE is set; {USE_INSTEAD}")
    # One connection first: the hub's client retries an unreachable host for 23 s.
    address = urlsplit(constants.ENDPOINT)
    port = address.port or (443 if address.scheme == "https" else 80)
    try:
        socket.create_connection((address.hostname, port), timeout=HUB_TIMEOUT_S).close()
    except OSError as unreachable:
        raise ModelUnavailableError(
            f"{tried}, and the hub at {constants.ENDPOINT} cannot be reached "
            f"({unreachable}); {USE_INSTEAD}"
        ) from None
    try:
        hf_hub_download(model, "config.json", etag_timeout=HUB_TIMEOUT_S)
    except (OSError, ValueError) as failed:  # the hub's errors derive from these
        reason = str(failed).split(". ")[0].splitlines()[0] if str(failed) else ""
        raise ModelUnavailableError(
            f"{tried}, and the hub at {constants.ENDPOINT} did not give it "
            f"({type(failed).__name__}: {reason[:200]}); {USE_INSTEAD}"
        ) from None
