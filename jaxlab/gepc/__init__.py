"""GEPC: group-equivariant posterior consistency of a diffusion score for OOD detection.

The method's API (``jaxlab.core.types.Algorithm``, the key always first)::

    alg = gepc.detector(eps_fn)                  # constructor: checks, binds settings
    state = alg.init(key, x_fit)                 # gepc.State: KDEs fitted on ID features
    state, info = alg.step(key, state, x)        # gepc.Info(scores [B], residuals [B, T, G])

``gepc.init(key, x_fit, score_fn, ts=...)`` / ``gepc.step(key, state, x, score_fn, ts=...)``
take the score function and settings as arguments. Modules: ``residual`` (the GEPC
residual), ``scoring`` (t selection, KDEs, GMMs), ``baselines`` (score norm, MSMA,
DiffPath), ``groups``, ``schedule``, ``model`` (the UNet eps-model, flax linen: see its
docstring), ``train`` (DDPM training, ``ScoreTrainState``), ``data`` (offline images),
``ood`` (this API).
"""

from jaxlab.gepc import baselines, data, groups, model, ood, residual, schedule, scoring, train
from jaxlab.gepc.ood import SQRT_ABARS, Info, State, detector, init, step
from jaxlab.gepc.residual import gepc_residuals, score_from_eps, top_rho_pool
from jaxlab.gepc.train import ScoreTrainState

__all__ = ["SQRT_ABARS", "Info", "ScoreTrainState", "State", "baselines", "data", "detector",
           "gepc_residuals", "groups", "init", "model", "ood", "residual", "schedule",
           "score_from_eps", "scoring", "step", "top_rho_pool", "train"]
