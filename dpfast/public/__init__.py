"""Private learning with public unlabelled data (see :doc:`/theory/public_data`).

Block, Bun, Desai, Shetty & Wu 2024, "Oracle-Efficient Differentially Private Learning with
Public Data": the Perturb template (Algorithm 1), the regularization learner (Algorithm 3) and
RRSPM (Algorithm 4), with exact noise calibration, native exact 0-1 oracles (thresholds,
stumps) and a generic oracle interface.  Algorithm 2 is not shipped (see
:mod:`dpfast.public._estimators`).
"""
from dpfast.public._estimators import PublicDataClassifier, PublicDataRegressor
from dpfast.public._oracles import Stump, count_oracle_calls, stump_oracle, threshold_oracle
from dpfast.public._perturb import PerturbResult, perturb, perturb_noise_scale, project_linear
from dpfast.public._regularization import (
    RegularizationResult,
    default_eta,
    public_geometry,
    regularization_learner,
    regularization_learner_generic,
    regularization_stability,
)
from dpfast.public._rrspm import RRSPMResult, rrspm, rrspm_public_size, rrspm_weight_scale

__all__ = [
    "PublicDataClassifier",
    "PublicDataRegressor",
    "Stump",
    "threshold_oracle",
    "stump_oracle",
    "count_oracle_calls",
    "PerturbResult",
    "perturb",
    "perturb_noise_scale",
    "project_linear",
    "RegularizationResult",
    "default_eta",
    "public_geometry",
    "regularization_learner",
    "regularization_learner_generic",
    "regularization_stability",
    "RRSPMResult",
    "rrspm",
    "rrspm_public_size",
    "rrspm_weight_scale",
]
