"""Bad-input cases for jaxlab.qlearning (MDPs, value iteration, schedules, periodic Q, config)."""

import tempfile

import jax
import jax.numpy as jnp
import numpy as np

from tests.bad_inputs.harness import Case


def _mdp(gamma=0.9):
    from jaxlab import qlearning as ql

    return ql.garnet(jax.random.key(0), 4, 2, 2, gamma)


def _raw_mdp(p=None, r=None, gamma=0.9):
    """A TabularMDP built directly (bypassing make_mdp), as a user might."""
    from jaxlab import qlearning as ql

    p = np.full((3, 2, 3), 1 / 3, np.float32) if p is None else p
    r = np.zeros((3, 2), np.float32) if r is None else r
    return ql.TabularMDP(jnp.asarray(p), jnp.asarray(r), jnp.float32(gamma))


def _make_mdp(**over):
    from jaxlab import qlearning as ql

    kw = dict(transitions=np.full((3, 2, 3), 1 / 3), rewards=np.zeros((3, 2)), gamma=0.9)
    kw.update(over)
    return ql.make_mdp(**kw)


def _vi(mdp=None, **kw):
    from jaxlab import qlearning as ql

    return ql.value_iteration(_mdp() if mdp is None else mdp, **kw)


def _bellman(q):
    from jaxlab import qlearning as ql

    return ql.bellman_optimality(_mdp(), q)


def _sched(fn, *args):
    from jaxlab.qlearning import schedules

    return getattr(schedules, fn)(*args)


def _state(mdp, q0=None):
    from jaxlab import qlearning as ql

    return ql.init(jax.random.key(0), mdp, q0)


def _simulate(q_star=None, num_records=2, record_every=5, **kw):
    from jaxlab import qlearning as ql

    mdp = _mdp()
    q_star = jnp.zeros((4, 2)) if q_star is None else q_star
    return ql.simulate(_state(mdp), mdp, ql.schedules.constant(3), q_star, num_records,
                       record_every, **kw)


def _periodic(mdp=None, **kw):
    from jaxlab import qlearning as ql

    return ql.periodic(_mdp() if mdp is None else mdp, ql.schedules.constant(3), **kw)


def _step(mdp=None, **kw):
    from jaxlab import qlearning as ql

    mdp = _mdp() if mdp is None else mdp
    return ql.step(jax.random.key(1), _state(mdp), mdp, ql.schedules.constant(3), **kw)


def _run_uniforms(us):
    from jaxlab import qlearning as ql

    mdp = _mdp()
    return ql.run_uniforms(_state(mdp), mdp, ql.schedules.constant(3), jnp.asarray(us))


def _s2a(samples, errors, eps=0.5):
    from jaxlab import qlearning as ql

    return ql.samples_to_accuracy(jnp.asarray(samples), jnp.asarray(errors), eps)


def _experiment(**over):
    """train_and_evaluate on a tiny smoke config with one field changed."""
    from experiments.lib import registry

    cfg = registry.get_config("qlearning", "smoke")
    cfg.families, cfg.variant_families = ("garnet",), ()
    cfg.constant_grid, cfg.growth_powers, cfg.base_grid = (5.0, 10.0, 1), (2 / 3,), (2.0,)
    cfg.eps_rel, cfg.num_seeds, cfg.num_val_seeds = (0.5,), 2, 1
    cfg.record_every, cfg.num_records, cfg.num_chunks = 10, 4, 1
    cfg.update(over)
    return registry.train_and_evaluate("qlearning", cfg, tempfile.mkdtemp(prefix="bad_ql_"))


_NAN_R = np.array([[0.0, np.nan], [0.0, 0.0], [0.0, 0.0]])
_NEG_P = np.tile(np.array([1.5, -0.5, 0.0]), (3, 2, 1))
_HALF_P = np.full((3, 2, 3), 1 / 6)

CASES = [
    # MDP constructors.
    Case("qlearning.make_mdp.rewards_nan", lambda: _make_mdp(rewards=_NAN_R), "rewards"),
    Case("qlearning.make_mdp.rewards_inf", lambda: _make_mdp(rewards=np.full((3, 2), np.inf)),
         "rewards"),
    Case("qlearning.make_mdp.negative_prob", lambda: _make_mdp(transitions=_NEG_P),
         "transitions"),
    Case("qlearning.make_mdp.gamma_one", lambda: _make_mdp(gamma=1.0), "gamma"),
    Case("qlearning.garnet.num_states_zero",
         lambda: _sched_free_garnet(0, 2, 1, 0.9), "num_states"),
    Case("qlearning.garnet.gamma_nan", lambda: _sched_free_garnet(4, 2, 2, float("nan")),
         "gamma"),
    Case("qlearning.chain.near_reward_nan",
         lambda: _chain(near_reward=float("nan")), "near_reward"),
    Case("qlearning.chain.far_reward_inf", lambda: _chain(far_reward=float("inf")),
         "far_reward"),
    # Value iteration and the Bellman operator.
    Case("qlearning.value_iteration.tol_zero", lambda: _vi(tol=0.0), "tol"),
    Case("qlearning.value_iteration.tol_negative", lambda: _vi(tol=-1e-3), "tol"),
    Case("qlearning.value_iteration.max_iters_zero", lambda: _vi(max_iters=0), "max_iters"),
    # Non-convergence of a solver is a RuntimeError (not an input error), still naming the cap.
    Case("qlearning.value_iteration.hits_cap", lambda: _vi(max_iters=3), "max_iters",
         errors=(RuntimeError,)),
    Case("qlearning.value_iteration.gamma_one", lambda: _vi(_raw_mdp(gamma=1.0), max_iters=50),
         "gamma"),
    Case("qlearning.value_iteration.rows_not_summing_to_one",
         lambda: _vi(_raw_mdp(p=_HALF_P)), "transitions"),
    Case("qlearning.value_iteration.negative_prob", lambda: _vi(_raw_mdp(p=_NEG_P)),
         "transitions"),
    Case("qlearning.value_iteration.rewards_nan", lambda: _vi(_raw_mdp(r=_NAN_R)), "rewards"),
    Case("qlearning.bellman_optimality.q_nan", lambda: _bellman(jnp.full((4, 2), jnp.nan)), "q"),
    Case("qlearning.bellman_optimality.negative_prob",
         lambda: _bellman_raw(_raw_mdp(p=_NEG_P)), "transitions"),
    # Schedules.
    Case("qlearning.schedules.geometric.ratio_inf", lambda: _sched("geometric", 1.0, np.inf),
         "ratio"),
    Case("qlearning.schedules.geometric.base_inf", lambda: _sched("geometric", np.inf, 1.0),
         "base"),
    Case("qlearning.schedules.constant.zero", lambda: _sched("constant", 0), "period"),
    Case("qlearning.schedules.constant_step.alpha_nan",
         lambda: _sched("constant_step", float("nan")), "alpha"),
    Case("qlearning.schedules.theory.gamma_one", lambda: _sched("theory", 1.0), "gamma"),
    Case("qlearning.schedules.growth.power_nan", lambda: _sched("growth", 0.9, float("nan")),
         "power"),
    Case("qlearning.schedules.growth.power_zero", lambda: _sched("growth", 0.9, 0.0), "power"),
    Case("qlearning.schedules.sgd_step.xi_zero", lambda: _sched("sgd_step", 0.0), "xi"),
    Case("qlearning.schedules.sgd_step.xi_above_one", lambda: _sched("sgd_step", 1.5), "xi"),
    Case("qlearning.schedules.sgd_step.scale_nan",
         lambda: _sched("sgd_step", 0.1, float("nan")), "scale"),
    Case("qlearning.schedules.sgd_step.offset_negative",
         lambda: _sched("sgd_step", 0.1, 2.0, -1.0), "offset"),
    # MDP families and the behaviour distribution.
    Case("qlearning.sparse_reward.too_many_rewarding",
         lambda: _family("sparse_reward", jax.random.key(0), 3, 2, 2, 0.99, num_rewarding=7),
         "num_rewarding"),
    Case("qlearning.sparse_reward.branching_too_large",
         lambda: _family("sparse_reward", jax.random.key(0), 3, 2, 4, 0.99), "branching"),
    Case("qlearning.with_bernoulli_rewards.reward_above_one",
         lambda: _family("with_bernoulli_rewards", _raw_mdp(r=np.full((3, 2), 2.0))),
         "rewards"),
    Case("qlearning.stationary_distribution.reducible",
         lambda: _family("stationary_distribution", _reducible()), "mdp"),
    Case("qlearning.sampling_distribution.sampling_unknown",
         lambda: _family("sampling_distribution", _mdp(), "offline"), "sampling"),
    Case("qlearning.paper_sgd_step.reducible",
         lambda: _family("paper_sgd_step", _reducible(), "trajectory"), "mdp"),
    # Periodic Q-learning.
    Case("qlearning.init.q0_nan", lambda: _state(_mdp(), jnp.full((4, 2), jnp.nan)), "q0"),
    Case("qlearning.simulate.q_star_nan", lambda: _simulate(jnp.full((4, 2), jnp.nan)),
         "q_star"),
    Case("qlearning.simulate.record_every_zero", lambda: _simulate(record_every=0),
         "record_every"),
    Case("qlearning.simulate.sampling_unknown", lambda: _simulate(sampling="offline"),
         "sampling"),
    Case("qlearning.periodic.sampling_unknown",
         lambda: _periodic(sampling="offline"), "sampling"),
    Case("qlearning.periodic.rewards_nan", lambda: _periodic(_raw_mdp(r=_NAN_R)), "rewards"),
    Case("qlearning.periodic.init_q0_nan",
         lambda: _periodic().init(jax.random.key(0), jnp.full((4, 2), jnp.nan)), "q0"),
    Case("qlearning.step.sampling_unknown", lambda: _step(sampling="offline"), "sampling"),
    Case("qlearning.step.negative_prob", lambda: _step(_raw_mdp(p=_NEG_P)), "transitions"),
    Case("qlearning.run_uniforms.out_of_unit_interval",
         lambda: _run_uniforms(np.full((4, 3), 1.5)), "uniforms"),
    Case("qlearning.run_uniforms.nan", lambda: _run_uniforms(np.full((4, 3), np.nan)),
         "uniforms"),
    Case("qlearning.samples_to_accuracy.errors_nan",
         lambda: _s2a([1, 2, 3], [[np.nan, 0.1, 0.1]]), "errors"),
    Case("qlearning.samples_to_accuracy.length_mismatch",
         lambda: _s2a([1, 2], [[1.0, 0.1, 0.1]]), "trace_samples"),
    # Experiment config.
    Case("qlearning.config.num_seeds_one", lambda: _experiment(num_seeds=1), "num_seeds"),
    Case("qlearning.config.gamma_one", lambda: _experiment(gamma=1.0), "config.gamma"),
    Case("qlearning.config.eps_negative", lambda: _experiment(eps_rel=(-1.0,)),
         "config.eps_rel"),
    Case("qlearning.config.record_every_zero", lambda: _experiment(record_every=0),
         "config.record_every"),
    Case("qlearning.config.constant_grid_zero", lambda: _experiment(constant_grid=(0.0, 8.0, 1)),
         "config.constant_grid"),
    Case("qlearning.config.constant_grid_reversed",
         lambda: _experiment(constant_grid=(80.0, 8.0, 1)), "config.constant_grid"),
    Case("qlearning.config.growth_power_zero", lambda: _experiment(growth_powers=(0.0,)),
         "config.growth_powers"),
    Case("qlearning.config.base_below_one", lambda: _experiment(base_grid=(0.5,)),
         "config.base_grid"),
    Case("qlearning.config.family_unknown", lambda: _experiment(families=("gridworld",)),
         "config.families"),
    Case("qlearning.config.inner_loop_unknown", lambda: _experiment(inner_loop="adam"),
         "config.inner_loop"),
    Case("qlearning.config.sparse_gamma_one", lambda: _experiment(sparse_gamma=1.0),
         "config.sparse_gamma"),
    Case("qlearning.config.scale_negative", lambda: _experiment(scale={
        "garnet": -1.0, "chain": 1.0, "sparse": 1.0, "bernoulli": 1.0}), "config.scale"),
    Case("qlearning.config.num_val_seeds_zero", lambda: _experiment(num_val_seeds=0),
         "config.num_val_seeds"),
    Case("qlearning.config.sampling_unknown", lambda: _experiment(sampling="offline"),
         "config.sampling"),
    Case("qlearning.config.num_chunks_zero", lambda: _experiment(num_chunks=0),
         "config.num_chunks"),
]


def _sched_free_garnet(s, a, b, gamma):
    from jaxlab import qlearning as ql

    return ql.garnet(jax.random.key(0), s, a, b, gamma)


def _chain(**kw):
    from jaxlab import qlearning as ql

    return ql.chain(4, 0.9, **kw)


def _bellman_raw(mdp):
    from jaxlab import qlearning as ql

    return ql.bellman_optimality(mdp, jnp.zeros((3, 2)))


def _family(fn, *args, **kw):
    from jaxlab import qlearning as ql

    return getattr(ql, fn)(*args, **kw)


def _reducible():
    p = np.zeros((3, 1, 3), np.float32)
    p[0, 0, 1] = p[1, 0, 1] = p[2, 0, 2] = 1.0
    return _raw_mdp(p=p, r=np.zeros((3, 1), np.float32))


# The paper's comparison (qlearning.compare and its parts): the bad argument is refused
# before any run is simulated.
def _problem(**kw):
    from jaxlab import qlearning as ql

    return ql.problem(_mdp(), num_records=2, record_every=5, **kw)


def _ql(fn, *args, **kw):
    from jaxlab import qlearning as ql

    return getattr(ql, fn)(*args, **kw)


CASES += [
    Case("qlearning.compare: eps_rel as a setting (it is the Problem's)", lambda: _ql(
        "compare", jax.random.key(0), _problem(), settings={"eps_rel": 0.2}, progress=False),
         "`settings`"),
    Case("qlearning.compare: problem a transition array", lambda: _ql(
        "compare", jax.random.key(0), np.full((4, 2, 4), 0.25), progress=False), "`problem`"),
    Case("qlearning.problem: q_star a V* vector [S], not Q* [S, A]",
         lambda: _problem(q_star=jnp.ones(4)), "`q_star`"),
    Case("qlearning.problem: inner_loop unknown", lambda: _problem(inner_loop="adam"),
         "`inner_loop`"),
    Case("qlearning.metric_name: eps_rel a string", lambda: _ql("metric_name", "10%"),
         "`eps_rel`"),
    Case("qlearning.check_problem: an MDP, not a Problem", lambda: _ql("check_problem", _mdp()),
         "`problem`"),
    Case("qlearning.check_problem: record_every 0", lambda: _ql(
        "check_problem", _problem()._replace(record_every=0)), "`problem.record_every`"),
    Case("qlearning.problem: eps_rel repeated", lambda: _problem(eps_rel=(0.1, 0.1)),
         "`eps_rel`"),
    Case("qlearning.compare: growth without its power", lambda: _ql(
        "compare", jax.random.key(0), _problem(), contenders=("theory", "growth"),
        progress=False), "`contenders"),
    Case("qlearning.compare: contenders one string", lambda: _ql(
        "compare", jax.random.key(0), _problem(), contenders="theory", progress=False),
         "`contenders`"),
    Case("qlearning.constant_contender: one period, not a grid",
         lambda: _ql("constant_contender", 50), "`periods`"),
    Case("qlearning.constant_contender: period 0",
         lambda: _ql("constant_contender", (0, 50)), "`periods[0]`"),
    Case("qlearning.growth_contender: one base, not a grid",
         lambda: _ql("growth_contender", bases=4.0), "`bases`"),
    Case("qlearning.growth_contender: power NaN",
         lambda: _ql("growth_contender", float("nan")), "`power`"),
    Case("qlearning.samples_to_eps: problem an MDP, not a Problem", lambda: _ql(
        "samples_to_eps", jax.random.split(jax.random.key(0), 2), _mdp(),
        _sched("constant", 5)), "`problem`"),
    Case("qlearning.samples_to_eps: schedule a period, not a schedule", lambda: _ql(
        "samples_to_eps", jax.random.split(jax.random.key(0), 2), _problem(), 5),
         "`schedule`"),
]
