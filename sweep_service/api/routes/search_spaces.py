"""``/v1/search-spaces``: the presets a sweep spec can extend."""

from __future__ import annotations

from fastapi import APIRouter

from search_spaces.resolve import get_preset, list_presets, trial_count
from sweep_service.api.deps import OwnerDep
from sweep_service.api.errors import COMMON_ERRORS, documented
from sweep_service.api.schemas import SearchSpaceDetail, SearchSpacePublic, SearchSpacesPublic

router = APIRouter(
    prefix="/search-spaces", tags=["search spaces"], responses=documented(COMMON_ERRORS)
)


@router.get("")
def read_search_spaces(owner: OwnerDep) -> SearchSpacesPublic:
    """Every preset with its description and trial count; each runs as
    ``{"extends": "<name>"}``."""
    data = [SearchSpacePublic(**preset.model_dump()) for preset in list_presets()]
    return SearchSpacesPublic(data=data, count=len(data))


@router.get("/{name}", responses=documented({404: "no such preset; the valid names"}))
def read_search_space(name: str, owner: OwnerDep) -> SearchSpaceDetail:
    """The preset ``name`` resolved into a whole spec (its ``extends`` applied)."""
    spec = get_preset(name)
    return SearchSpaceDetail(
        name=name,
        description=spec.description,
        trial_count=trial_count(spec),
        spec=spec.model_dump(mode="json"),
    )
