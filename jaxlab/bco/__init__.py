"""Gradient-variation bandit convex optimization (arXiv 2602.04761).

The uniform jaxlab API (``jaxlab.core.types.Algorithm``; the key always first)::

    from jaxlab import bco

    learner = bco.gradient_variation(bco.ball(16), delta=0.05)   # the main constructor
    state = learner.init(key, x0)              # bco.State; x0 optional
    state, info = learner.step(key, state, f)  # bco.Info; f: [d] -> []
    info = bco.run(key, learner, seq, x0)      # every round of a loss sequence, one scan

Signatures:
  * constructors, all returning ``Algorithm(init, step)``: ``gradient_variation(domain,
    delta, rule=None)``, ``ogd_sqrt_d_step(...)``, ``agarwal2010(...)``, ``two_point(domain,
    delta, rule, optimistic=True)``, ``one_point_box(box, delta, rule, hint="ema",
    beta=None)``, ``ensembles.ensemble / dynamic_ensemble / universal_ensemble`` (their
    ``meta=`` "hedge", "optimistic_hedge" or "msmwc"; ``msmwc`` is Chen, Luo, Wei 2021's
    meta-learner as pure functions: ``init``, ``play``, ``update``, ``run``).
  * ``learner.init(key, x0=None) -> State`` (deterministic; x0 defaults to the domain's
    centre); ``learner.step(key, state, f) -> (State, Info)``, the key draws the
    exploration direction.
  * module level, the two-point learner with its hyperparameters as arguments:
    ``init(key, domain, delta, x0=None) -> State``; ``step(key, state, f, domain, delta,
    rule=None, optimistic=True) -> (State, Info)``.
  * ``State``: xhat, hint, sum_var, t (``ensembles.EnsembleState`` for the ensembles).
  * ``Info``: x (played point), loss (charged loss), g (gradient estimate).
  * ``run(key, learner, seq, x0) -> Info`` with [T] leading axes; ``regret``,
    ``dynamic_regret``.
  * your own loss family: ``loss_sequence(params, loss, comparator=None, minimiser=None,
    smoothness=None) -> FunctionSeq``, taken by ``run`` / ``regret`` / ``dynamic_regret``.
  * ``step_rule(scale, lam, eta_max) -> StepRule`` (a pytree: ``vmap`` over step sizes);
    every constructor also works inside ``jit`` with traced ``delta`` / domain / rule.

The paper's protocol on your own loss sequences (step multipliers tuned on validation
seeds, paired test seeds, bootstrap CIs; ``jaxlab.core.protocol``): ``compare(key,
problem, *, contenders=None, tuning=None, seeds=None, goals=None, pairs=None, metrics=None,
...) -> Comparison``, the one signature of every method's ``compare`` (``SPEC`` declares
it), on ``problem(make_seq, domain, delta=0.05, regret="static" | "dynamic",
comparator_iters=None)``; ``final_regrets`` is the per-seed runner, ``two_point_contender``
a contender with another declared grid.
"""

from jaxlab.bco import domains, ensembles, estimators, learners, losses, msmwc, variation
from jaxlab.bco.comparison import (
    DEFAULT_MULTIPLIERS,
    SPEC,
    compare,
    two_point_contender,
)
from jaxlab.bco.domains import Ball, Box, ball, box
from jaxlab.bco.learners import (
    Info,
    State,
    StepRule,
    agarwal2010,
    gradient_variation,
    init,
    ogd_sqrt_d_step,
    one_point_box,
    step,
    step_rule,
    two_point,
)
from jaxlab.bco.losses import FunctionSeq, loss_sequence
from jaxlab.bco.regrets import Problem, check_problem, final_regrets, problem
from jaxlab.bco.run import dynamic_regret, regret, run

__all__ = [
    "DEFAULT_MULTIPLIERS", "SPEC", "Problem", "check_problem", "compare", "final_regrets",
    "problem", "two_point_contender",
    "Ball", "Box", "FunctionSeq", "Info", "State", "StepRule", "agarwal2010", "ball", "box",
    "domains", "dynamic_regret", "ensembles", "estimators", "gradient_variation", "init",
    "learners", "loss_sequence", "losses", "msmwc", "ogd_sqrt_d_step", "one_point_box",
    "regret", "run", "step", "step_rule", "two_point", "variation",
]
