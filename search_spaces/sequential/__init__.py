"""Seeds until a difference is decided: a group-sequential rule over a cell's paired
seed differences (``rule``) and its boundaries (``boundaries``). Pure numerics (numpy,
SciPy), beside ``tuning.py`` rather than under ``reports/``: the driver follows the rule
to stop a cell's seeds, and the reports show its verdicts."""

from search_spaces.sequential.boundaries import (
    information_fractions,
    repeated_p_value,
    spent,
    t_boundaries,
    z_boundaries,
    z_equivalent,
)
from search_spaces.sequential.rule import (
    FUTILITY_POWER,
    Design,
    Look,
    LookStatistics,
    SeedsUntilDecided,
    Verdict,
    design,
    look_statistics,
    run_rule,
    verdict_at,
)

__all__ = [
    "FUTILITY_POWER",
    "Design",
    "Look",
    "LookStatistics",
    "SeedsUntilDecided",
    "Verdict",
    "design",
    "information_fractions",
    "look_statistics",
    "repeated_p_value",
    "run_rule",
    "spent",
    "t_boundaries",
    "verdict_at",
    "z_boundaries",
    "z_equivalent",
]
