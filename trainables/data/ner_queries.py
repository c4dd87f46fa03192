"""The queries of NER as reading comprehension, per data set and entity type.

BERT-MRC asks one question per entity type; a question that describes the type
(from its annotation guideline) tells the encoder what to look for. These describe
the CoNLL-2003 types after its guideline (Tjong Kim Sang and De Meulder, 2003, and
the MUC-7 conventions it follows), in our own words. A data set without an entry,
or a type without one, is asked for the tag's name (``PER``); a spec may give its own
queries (``task.mrc.queries``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

QUERIES: dict[str, dict[str, str]] = {
    "conll2003": {
        "PER": "Find the people: names of persons, real or fictional, such as first names, "
        "surnames and nicknames.",
        "LOC": "Find the locations: names of places such as countries, cities, regions, "
        "continents, mountains, rivers and seas.",
        "ORG": "Find the organizations: companies, institutions, government bodies, "
        "political parties, sports teams, newspapers and other named groups.",
        "MISC": "Find the other names: nationalities and adjectives made from names, "
        "events, languages, titles of works, products and names that are not of a "
        "person, place or organization.",
    },
}


def queries_for(
    dataset: str, types: Sequence[str], given: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The query of each entity type: ``given`` first, then the data set's own, else the
    type's name."""
    known = {**QUERIES.get(dataset, {}), **(given or {})}
    return {kind: known.get(kind, kind) for kind in types}
