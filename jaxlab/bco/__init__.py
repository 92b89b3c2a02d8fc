"""Gradient-variation bandit convex optimization (arXiv 2602.04761)."""

from jaxlab.bco import domains, ensembles, estimators, learners, losses
from jaxlab.bco.domains import Ball, Box, ball, box
from jaxlab.bco.learners import (
    BanditLearner,
    BanditState,
    RoundInfo,
    StepRule,
    agarwal2010,
    chiang2013,
    gradient_variation,
    one_point_box,
    step_rule,
    two_point,
)
from jaxlab.bco.run import dynamic_regret, regret, run

__all__ = [
    "Ball", "BanditLearner", "BanditState", "Box", "RoundInfo", "StepRule", "agarwal2010",
    "ball", "box", "chiang2013", "domains", "dynamic_regret", "ensembles", "estimators",
    "gradient_variation", "learners", "losses", "one_point_box", "regret", "run", "step_rule",
    "two_point",
]
