"""GEPC: group-equivariant posterior consistency of a diffusion score for OOD detection.

The method's API (``jaxlab.core.types.Algorithm``, the key always first)::

    alg = gepc.detector(eps_fn)                  # constructor: checks, binds settings
    state = alg.init(key, x_fit)                 # gepc.State: KDEs fitted on ID features
    state, info = alg.step(key, state, x)        # gepc.Info(scores, residuals, features)

The default scorer is the public code's (``scorer="official"``: the residual averaged over
G, one KDE per t, the 2 lowest-CV t, inverse-CV weights); ``scorer="per_element"`` (one
KDE per (t, g) residual) is our extension.

``gepc.init(key, x_fit, score_fn, ts=...)`` / ``gepc.step(key, state, x, score_fn, ts=...)``
take the score function and settings as arguments. Modules: ``residual`` (the GEPC
residual, the public code's per-t features, the exact blind spot of self-inverse
elements), ``scoring`` (t selection, KDEs, GMMs; ``fit_official`` and ``fit``),
``baselines`` (score norm, MSMA, DiffPath, denoising-error maps; ``baselines.fit`` /
``baselines.score`` fit and score every method on your features), ``groups``,
``schedule``, ``model`` (the UNet eps-model, flax linen: see its docstring), ``train``
(DDPM training, ``ScoreTrainState``), ``data`` (offline images, the stratified split),
``ood`` (this API, and ``auroc_with_ci``: AUROC with a bootstrap CI), ``features``
(every study method's per-image features and fitted scorers), ``comparison``
(``compare(key, OODProblem(eps_fn, x_fit, x_id, x_ood), seeds=...)``: the study's
protocol, paired AUROC CIs, on your problem).

What follows what: the residual, the per-t features (``gepc_s``, ``gepc_s_cos``,
``gepc_s_pair``), the group, rho, the candidate times and the official scorer follow the
public code (RouzAY/gepc-diffusion, ``gepc/methods/gepc.py``); training our own small UNet
on the ID split, the per-element scorer, the log-KDE option, the invariant-clutter
testbed and the denoising-error localisation baseline are ours.
"""

from jaxlab.gepc import (
    baselines,
    comparison,
    data,
    features,
    groups,
    model,
    ood,
    residual,
    schedule,
    scoring,
    train,
)
from jaxlab.gepc.baselines import Fitted
from jaxlab.gepc.comparison import OODProblem, compare
from jaxlab.gepc.features import Settings
from jaxlab.gepc.ood import (
    SCORERS,
    SQRT_ABARS,
    AurocCI,
    Info,
    State,
    auroc_with_ci,
    detector,
    init,
    step,
)
from jaxlab.gepc.residual import (
                                  OFFICIAL_FEATURES,
                                  consistency_features,
                                  gepc_residuals,
                                  score_from_eps,
                                  top_rho_pool,
)
from jaxlab.gepc.train import ScoreTrainState

__all__ = ["OFFICIAL_FEATURES", "SCORERS", "SQRT_ABARS", "AurocCI", "Fitted", "Info",
           "OODProblem", "ScoreTrainState", "Settings", "State", "auroc_with_ci",
           "baselines", "compare", "comparison", "consistency_features", "data",
           "detector", "features", "gepc_residuals",
           "groups", "init", "model", "ood", "residual", "schedule", "score_from_eps",
           "scoring", "step", "top_rho_pool", "train"]
