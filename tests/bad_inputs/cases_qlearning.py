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
    cfg.constant_periods, cfg.theory_bases, cfg.shrinking = [5], [2.0], [(10.0, 0.9)]
    cfg.eps_list, cfg.num_seeds = [1.0], 2
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
         lambda: _run_uniforms(np.full((4, 2), 1.5)), "uniforms"),
    Case("qlearning.run_uniforms.nan", lambda: _run_uniforms(np.full((4, 2), np.nan)),
         "uniforms"),
    Case("qlearning.samples_to_accuracy.errors_nan",
         lambda: _s2a([1, 2, 3], [[np.nan, 0.1, 0.1]]), "errors"),
    Case("qlearning.samples_to_accuracy.length_mismatch",
         lambda: _s2a([1, 2], [[1.0, 0.1, 0.1]]), "trace_samples"),
    # Experiment config.
    Case("qlearning.config.num_seeds_one", lambda: _experiment(num_seeds=1), "num_seeds"),
    Case("qlearning.config.gamma_one", lambda: _experiment(gamma=1.0), "config.gamma"),
    Case("qlearning.config.eps_negative", lambda: _experiment(eps_list=[-1.0]),
         "config.eps_list"),
    Case("qlearning.config.record_every_zero", lambda: _experiment(record_every=0),
         "config.record_every"),
    Case("qlearning.config.constant_period_zero", lambda: _experiment(constant_periods=[0]),
         "config.constant_periods"),
    Case("qlearning.config.step_size_negative", lambda: _experiment(step_size="-0.5"),
         "config.step_size"),
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
