"""Periodic Q-learning with constant and geometric target-update periods (arXiv 2602.03911).

The uniform jaxlab API (``jaxlab.core.types.Algorithm``; the key always first)::

    from jaxlab import qlearning as ql

    mdp = ql.garnet(jax.random.key(0), num_states=10, num_actions=2, branching=3, gamma=0.9)
    alg = ql.periodic(mdp, ql.schedules.theory(0.9, base=50.0))
    state = alg.init(key)                  # ql.State
    state, info = alg.step(key, state)     # one SGD sample step; ql.Info diagnostics

Signatures:
  * ``periodic(mdp, schedule, *, sampling="generative", step_size=None) -> Algorithm``
    with ``init(key, q0=None) -> State`` and ``step(key, state) -> (State, Info)``.
  * ``init(key, mdp, q0=None) -> State``.
  * ``step(key, state, mdp, schedule, sampling="generative", step_size=None)
    -> (State, Info)``; the key supplies the step's two uniforms.
  * ``State``: q, target, visits, inner_step, outer_iter, env_state, num_samples, key.
  * ``Info``: state, action, next_state, td_error, step_size, target_updated.

The experiment's bulk path (one ``lax.scan`` per chunk, uniforms drawn up front from
``state.key``): ``run_steps``, ``simulate`` (-> ``Trace``), ``run_uniforms``; then
``samples_to_accuracy``. MDPs: ``garnet``, ``chain``,
``sparse_reward``, ``with_bernoulli_rewards``, ``make_mdp``; ``value_iteration`` for Q*;
``stationary_distribution`` / ``sampling_distribution`` for the behaviour distribution;
period schedules and inner-loop step sizes in ``schedules`` (the paper's SGD inner loop:
``step_size=paper_sgd_step(mdp, sampling)``; the default ``inverse_count_step`` is the
running-mean variant).

The paper's protocol on any MDP (validation-tuned grids, paired test seeds, bootstrap CIs,
censoring at the run length; ``jaxlab.core.protocol``): ``compare(key, problem, *,
contenders=None, tuning=None, seeds=None, goals=None, pairs=None, metrics=None, ...) ->
Comparison``, the one signature of every method's ``compare`` (``SPEC`` declares it);
``problem(mdp, eps_rel=..., ...)`` builds the shared run settings (one metric per
``eps_rel``), ``samples_to_eps`` is the per-seed runner, ``constant_contender`` /
``growth_contender`` the contenders with other declared grids.
"""

from jaxlab.qlearning import schedules
from jaxlab.qlearning.comparison import (
    DEFAULT_BASES,
    DEFAULT_PERIODS,
    SPEC,
    compare,
    constant_contender,
    growth_contender,
)
from jaxlab.qlearning.mdp import (
    TabularMDP,
    chain,
    check_mdp,
    garnet,
    make_mdp,
    sparse_reward,
    stationary_distribution,
    with_bernoulli_rewards,
)
from jaxlab.qlearning.periodic_q import (
    SAMPLING_MODES,
    Info,
    State,
    Trace,
    init,
    paper_sgd_step,
    periodic,
    run_steps,
    run_uniforms,
    samples_to_accuracy,
    sampling_distribution,
    simulate,
    step,
)
from jaxlab.qlearning.runs import (
    Problem,
    check_problem,
    metric_name,
    problem,
    samples_to_eps,
    simulate_runs,
)
from jaxlab.qlearning.value_iteration import VIInfo, bellman_optimality, value_iteration

__all__ = [
    "DEFAULT_BASES", "DEFAULT_PERIODS", "SPEC", "Problem", "check_problem", "compare",
    "constant_contender", "growth_contender", "metric_name", "problem", "samples_to_eps",
    "simulate_runs",
    "SAMPLING_MODES", "Info", "State", "TabularMDP", "Trace", "VIInfo", "bellman_optimality",
    "chain", "check_mdp", "garnet", "init", "make_mdp", "paper_sgd_step", "periodic",
    "run_steps", "run_uniforms", "samples_to_accuracy", "sampling_distribution", "schedules",
    "simulate", "sparse_reward", "stationary_distribution", "step", "value_iteration",
    "with_bernoulli_rewards",
]
