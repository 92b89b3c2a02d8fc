"""GEPC: group-equivariant posterior consistency of a diffusion score for OOD detection."""

from jaxlab.gepc import baselines, data, groups, model, residual, schedule, scoring, train
from jaxlab.gepc.residual import gepc_residuals, score_from_eps, top_rho_pool

__all__ = ["baselines", "data", "gepc_residuals", "groups", "model", "residual", "schedule",
           "score_from_eps", "scoring", "top_rho_pool", "train"]
