"""Seeds until a difference is decided: a group-sequential rule over a cell's paired
seed differences (``rule``), its boundaries (``boundaries``) and their t-scale level
(``calibration``), and the rounds of seeds a sweep runs by it (``rounds``). Pure numerics (numpy,
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
from search_spaces.sequential.calibration import (
    calibrated_level,
    repeated_t_p_value,
    t_design_error,
)
from search_spaces.sequential.rounds import Round, first_round, next_round
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
    "Round",
    "SeedsUntilDecided",
    "Verdict",
    "calibrated_level",
    "design",
    "first_round",
    "information_fractions",
    "look_statistics",
    "next_round",
    "repeated_p_value",
    "repeated_t_p_value",
    "run_rule",
    "spent",
    "t_boundaries",
    "t_design_error",
    "verdict_at",
    "z_boundaries",
    "z_equivalent",
]
