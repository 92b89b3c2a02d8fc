"""Periodic Q-learning: SGD on the squared Bellman error toward a periodically frozen target.

Outer iteration n freezes Q_target = Q_n; the inner loop runs K_n = schedule(n) SGD steps
on the loss 1/2 (Q(s, a) - y)^2 with y = r(s, a) + gamma max_a' Q_target(s', a') for
sampled transitions (s, a, s'):

    Q(s, a) <- Q(s, a) + alpha (y - Q(s, a)),

after which Q_{n+1} = Q (arXiv 2602.03911; Lee & He, 2020). The reward in y is r(s, a),
or a Bernoulli(r(s, a)) draw for ``mdp.bernoulli`` MDPs. The run is a flat
``lax.scan`` over samples; the outer/inner structure is carried in the state counters,
so every run has static shapes and vmaps over seeds and schedules.

Two ways to run it:
  * the uniform jaxlab API (``jaxlab.core.types.Algorithm``): ``alg = periodic(mdp,
    schedule)``, ``state = alg.init(key)``, ``state, info = alg.step(key, state)``; one SGD
    step per call, its randomness (the two uniforms below) drawn from ``key``;
  * the bulk path used by the experiment: ``run_steps`` / ``simulate`` draw all uniforms of
    a chunk up front from ``state.key`` and scan the same kernel (``build_kernel``);
    ``run_uniforms`` scans given uniforms. ``step`` never reads or advances ``state.key``.

Sampling:
  * ``"generative"``: (s, a) uniform over S x A (xi = 1 / (S A)), s' ~ P(. | s, a).
  * ``"trajectory"``: asynchronous along one trajectory of the uniform behaviour
    policy, s_{t+1} = s'; (s, a) is then distributed (after mixing) as
    ``sampling_distribution`` = pi(s) / A, pi the stationary distribution.

Inner loops (the step size, ``schedules``):
  * the paper's: SGD on the squared Bellman error with the strongly-convex SGD step
    alpha_k = 2 / (xi (k + 2 / xi)) on the inner loop's global clock k
    (``paper_sgd_step``; xi = min (s, a) sampling probability). What follows the paper
    (arXiv 2602.03911, abstract): SGD on the squared Bellman error toward
    r + gamma max Q_target under asynchronous sampling, K_n inner steps per target.
    Not retrievable from our corpora: the paper's exact step-size constants and its
    K_0 formula (only its first page is stored). Ours: the textbook xi-strongly-convex
    step 2 / (xi (k + k_0)) with k_0 = 2 / xi, and K_0 picked on validation seeds.
  * the running mean (``inverse_count_step``: alpha = 1 / visits of (s, a) since the
    last target update): the inner loop returns the empirical Bellman backup; kept as a
    labelled variant (it was the default formerly).
  There is no official code for the paper.

Checks (eager, at the Python boundary, on concrete values; traced values pass, and
nothing is checked inside the compiled scan):
  * ``init``: ``q0`` shape [S, A] and finite.
  * ``build_kernel``, ``step``, ``periodic`` (and everything that calls them): ``sampling``
    in SAMPLING_MODES; the MDP is valid (``mdp.check_mdp``). ``periodic`` checks once,
    when it is built; ``step`` at every (eager or traced) call.
  * ``run_uniforms``: ``uniforms`` shape [T, 3] with entries in [0, 1) (NaN rejected).
  * ``sampling_distribution``, ``paper_sgd_step``: ``sampling`` in SAMPLING_MODES; a
    valid MDP; for "trajectory" an irreducible uniform-policy chain.
  * ``run_steps``: ``num_steps`` a positive integer.
  * ``simulate``: ``q_star`` shape [S, A] and finite; ``num_records`` and
    ``record_every`` positive integers.
  * ``samples_to_accuracy``: ``eps`` > 0; ``errors`` free of NaN; ``trace_samples`` of
    shape [R] with R = ``errors.shape[-1]``.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import checked, validation
from jaxlab.core.keys import as_key
from jaxlab.core.types import Algorithm, Array, PRNGKey
from jaxlab.qlearning.mdp import TabularMDP, check_mdp, check_mdp_traced, stationary_distribution
from jaxlab.qlearning.schedules import PolynomialStep, SGDStep, inverse_count_step, sgd_step

checked.declare("jaxlab.qlearning.run_steps")

SAMPLING_MODES = ("generative", "trajectory")
StepSize = PolynomialStep | SGDStep


class PeriodicQState(NamedTuple):
    """State of one periodic Q-learning run.

    Attributes:
      q: [S, A] online estimate (updated by SGD).
      target: [S, A] frozen target Q_n.
      visits: [S, A] int32 visits of each (s, a) since the last target update.
      inner_step: int32 SGD steps since the last target update.
      outer_iter: int32 number n of completed target updates.
      env_state: int32 current state of the behaviour trajectory.
      num_samples: int32 transitions consumed so far.
      key: PRNG key of the bulk path (``run_steps`` / ``simulate``); ``step`` takes its
        randomness from its own key argument and leaves this field unchanged.
    """

    q: Array
    target: Array
    visits: Array
    inner_step: Array
    outer_iter: Array
    env_state: Array
    num_samples: Array
    key: PRNGKey


State = PeriodicQState


class Info(NamedTuple):
    """Diagnostics of one SGD step (``step``; every field a scalar).

    Attributes:
      state: int32 sampled state s.
      action: int32 sampled action a.
      next_state: int32 sampled next state s'.
      td_error: float32 y - Q(s, a) before the update, y = r(s, a) + gamma max Q_target(s').
      step_size: float32 alpha applied to (s, a).
      reward: float32 sampled reward (r(s, a), or its Bernoulli draw).
      target_updated: bool, True when this step ended an inner loop (Q_target <- Q).
    """

    state: Array
    action: Array
    next_state: Array
    td_error: Array
    step_size: Array
    target_updated: Array
    reward: Array


class Trace(NamedTuple):
    """Errors recorded every ``record_every`` samples.

    Attributes:
      samples: [R] transitions consumed at each record.
      target_error: [R] ||Q_target - Q*||_inf (the output of the last finished outer step).
      q_error: [R] ||Q - Q*||_inf of the online estimate.
      outer_iter: [R] completed target updates.
    """

    samples: Array
    target_error: Array
    q_error: Array
    outer_iter: Array


def init(key: PRNGKey, mdp: TabularMDP, q0: Array | None = None) -> PeriodicQState:
    """Initial state with Q = Q_target = q0 (default zeros) and a random start state.

    Args:
      key: PRNG key; draws the start state of the behaviour trajectory and seeds
        ``state.key`` (the bulk path's key).
      mdp: the MDP.
      q0: [S, A] initial Q (default zeros).

    Returns:
      The ``PeriodicQState`` before any sample.
    """
    key = as_key(key)
    shape = (mdp.num_states, mdp.num_actions)
    if q0 is None:
        q0 = jnp.zeros(shape, jnp.float32)
    validation.check_shape("q0", q0, shape)
    validation.check_finite("q0", q0)
    q0 = jnp.asarray(q0, jnp.float32)
    k_start, key = jax.random.split(key)
    zero = jnp.zeros((), jnp.int32)
    return PeriodicQState(
        q=q0, target=q0, visits=jnp.zeros(shape, jnp.int32), inner_step=zero, outer_iter=zero,
        env_state=jax.random.randint(k_start, (), 0, mdp.num_states, jnp.int32),
        num_samples=zero, key=key)


def _check_sampling(sampling: str) -> None:
    if sampling not in SAMPLING_MODES:
        raise ValueError(f"`sampling` must be one of {SAMPLING_MODES}, got {sampling!r}.")


def _build_sgd_step(mdp: TabularMDP, sampling: str, step_size: StepSize | None):
    """``sgd_step(state, schedule, u) -> (state, Info)``: one SGD step driven by ``u``: [3]."""
    _check_sampling(sampling)
    check_mdp(mdp)
    step_size = inverse_count_step() if step_size is None else step_size
    n_s, n_a = mdp.num_states, mdp.num_actions
    cdf = jnp.cumsum(mdp.transitions, axis=-1)

    def sgd_step(state: PeriodicQState, schedule, u: Array) -> tuple[PeriodicQState, Info]:
        if sampling == "generative":
            pair = jnp.minimum((u[0] * n_s * n_a).astype(jnp.int32), n_s * n_a - 1)
            s, a = pair // n_a, pair % n_a
        else:
            s = state.env_state
            a = jnp.minimum((u[0] * n_a).astype(jnp.int32), n_a - 1)
        s_next = jnp.minimum(jnp.searchsorted(cdf[s, a], u[1] * cdf[s, a, -1], side="right",
                                              method="compare_all"),
                             n_s - 1).astype(jnp.int32)
        reward = mdp.rewards[s, a]
        if mdp.bernoulli is not None:
            reward = jnp.where(mdp.bernoulli, (u[2] < reward).astype(jnp.float32), reward)
        y = reward + mdp.gamma * jnp.max(state.target[s_next])
        count = state.visits[s, a] + 1
        alpha = step_size(count, state.inner_step)
        td_error = y - state.q[s, a]
        q = state.q.at[s, a].add(alpha * td_error)
        inner = state.inner_step + 1
        update = inner >= schedule(state.outer_iter)
        new = PeriodicQState(
            q=q,
            target=jnp.where(update, q, state.target),
            visits=jnp.where(update, 0, state.visits.at[s, a].set(count)),
            inner_step=jnp.where(update, 0, inner),
            outer_iter=state.outer_iter + update.astype(jnp.int32),
            env_state=s_next,
            num_samples=state.num_samples + 1,
            key=state.key,
        )
        info = Info(state=s.astype(jnp.int32), action=a.astype(jnp.int32), next_state=s_next,
                    td_error=td_error, step_size=jnp.asarray(alpha, jnp.float32),
                    target_updated=update, reward=jnp.asarray(reward, jnp.float32))
        return new, info

    return sgd_step


def build_kernel(mdp: TabularMDP, sampling: str = "generative",
                 step_size: StepSize | None = None):
    """Returns ``kernel(state, schedule, u) -> state`` performing one SGD step.

    Args:
      mdp: the MDP.
      sampling: one of SAMPLING_MODES.
      step_size: step size ``(count, k) -> alpha`` (``schedules``); default
        ``inverse_count_step()``.

    The kernel takes ``u``: [3] uniforms in [0, 1) that pick the (s, a) pair (or the
    behaviour action), the next state by inverse-CDF lookup, and (Bernoulli-reward MDPs
    only) the reward, r = 1[u_2 < r(s, a)]. ``step`` is this kernel
    with ``u`` drawn from a key and the step's ``Info`` returned.
    """
    sgd_step = _build_sgd_step(mdp, sampling, step_size)

    def kernel(state: PeriodicQState, schedule, u: Array) -> PeriodicQState:
        return sgd_step(state, schedule, u)[0]

    return kernel


def _uniforms(key: PRNGKey) -> Array:
    """The step's [3] uniforms in [0, 1) (pair or action, next state, reward)."""
    return jax.random.uniform(key, (3,))


def step(key: PRNGKey, state: PeriodicQState, mdp: TabularMDP, schedule,
         sampling: str = "generative",
         step_size: StepSize | None = None) -> tuple[PeriodicQState, Info]:
    """One SGD step of periodic Q-learning (the uniform API; see ``periodic``).

    Args:
      key: PRNG key of this step: ``u = jax.random.uniform(key, (3,))`` picks the sample
        exactly as ``build_kernel``'s ``u`` does.
      state: current state (``init``); ``state.key`` is neither read nor advanced.
      mdp: the MDP.
      schedule: period schedule, ``schedule(n) -> K_n``.
      sampling: one of SAMPLING_MODES.
      step_size: step size ``(count, k) -> alpha`` (``schedules``); default
        ``inverse_count_step()``.

    Returns:
      (next state, Info of the step).
    """
    key = as_key(key)
    return _build_sgd_step(mdp, sampling, step_size)(state, schedule, _uniforms(key))


def periodic(mdp: TabularMDP, schedule, *, sampling: str = "generative",
             step_size: StepSize | None = None) -> Algorithm:
    """Periodic Q-learning as an ``Algorithm`` with the MDP and the schedule bound.

    ``alg.init(key, q0=None) -> State`` is ``init(key, mdp, q0)``;
    ``alg.step(key, state) -> (State, Info)`` is ``step(key, state, mdp, schedule, ...)``.
    Both are pure: jit them, vmap them over keys (seeds), or over states and schedules by
    building the algorithm inside the vmapped function.

    Args:
      mdp: the MDP (checked once, here).
      schedule: period schedule, ``schedule(n) -> K_n`` (``schedules``).
      sampling: one of SAMPLING_MODES (checked here).
      step_size: step size ``(count, k) -> alpha`` (``schedules``); default
        ``inverse_count_step()``.

    Returns:
      ``Algorithm(init, step)``.
    """
    sgd_step = _build_sgd_step(mdp, sampling, step_size)

    def init_fn(key: PRNGKey, q0: Array | None = None) -> PeriodicQState:
        return init(key, mdp, q0)

    def step_fn(key: PRNGKey, state: PeriodicQState) -> tuple[PeriodicQState, Info]:
        return sgd_step(state, schedule, _uniforms(key))

    return Algorithm(init_fn, step_fn)


def run_uniforms(state: PeriodicQState, mdp: TabularMDP, schedule, uniforms: Array,
                 sampling: str = "generative", step_size: StepSize | None = None,
                 unroll: int = 1) -> PeriodicQState:
    """Runs one SGD step per row of ``uniforms`` ([T, 3] in [0, 1)) in one ``lax.scan``."""
    validation.check_shape("uniforms", uniforms, (None, 3))
    validation.check_in_range("uniforms", uniforms, 0.0, 1.0, high_inclusive=False)
    return _scan_uniforms(state, mdp, schedule, uniforms, sampling, step_size, unroll)


def _scan_body(state, mdp, schedule, uniforms, *, sampling, step_size, unroll,
               static_schedule=None):
    schedule = static_schedule if static_schedule is not None else schedule
    check_mdp_traced(mdp)
    kernel = build_kernel(mdp, sampling, step_size)
    state, _ = jax.lax.scan(lambda st, u: (kernel(st, schedule, u), None), state, uniforms,
                            unroll=unroll)
    checked.check(jnp.all(jnp.isfinite(state.q)), "Q became non-finite; check `mdp.rewards` "
                  "and `step_size`.")
    return state


def _scan_uniforms(state, mdp, schedule, uniforms, sampling, step_size, unroll):
    arrays = all(isinstance(x, jax.Array | np.ndarray | float | int)
                 for x in jax.tree.leaves(schedule))
    return checked.run("jaxlab.qlearning.run_steps", _scan_body, state, mdp,
                       schedule if arrays else None, uniforms, sampling=sampling,
                       step_size=step_size, unroll=unroll,
                       static_schedule=None if arrays else schedule)


@checked.boundary
def run_steps(state: PeriodicQState, mdp: TabularMDP, schedule, num_steps: int,
              sampling: str = "generative", step_size: StepSize | None = None,
              unroll: int = 1) -> PeriodicQState:
    """Runs ``num_steps`` SGD steps in one ``lax.scan`` (uniforms drawn up front)."""
    validation.check_positive_int("num_steps", num_steps)
    key, k_u = jax.random.split(state.key)
    us = jax.random.uniform(k_u, (num_steps, 3))
    # The uniforms are drawn in [0, 1) here: no value check needed.
    return _scan_uniforms(state._replace(key=key), mdp, schedule, us, sampling, step_size,
                          unroll)


def _check_run_size(num_records: int, record_every: int) -> None:
    """Refuses, before tracing, runs whose int32 sample counter would wrap or whose trace
    (four 4-byte fields per record, held twice by the scan) does not fit in memory."""
    total = int(num_records) * int(record_every)
    if total > np.iinfo(np.int32).max:
        raise ValueError(f"`num_records` * `record_every` = {total:.3g} samples overflow the "
                         f"int32 sample counter (at most {np.iinfo(np.int32).max}); lower "
                         f"`num_records` or `record_every`.")
    validation.check_memory("num_records", num_records, 2 * 16 * int(num_records),
                            "the recorded trace (16 bytes per record, held twice)")


def simulate(state: PeriodicQState, mdp: TabularMDP, schedule, q_star: Array,
             num_records: int, record_every: int, sampling: str = "generative",
             step_size: StepSize | None = None) -> tuple[PeriodicQState, Trace]:
    """Runs ``num_records * record_every`` steps, recording errors to ``q_star``.

    Jittable (``num_records``, ``record_every``, ``sampling`` static) and vmappable over
    ``state`` (seeds) and ``schedule`` (a stacked schedule family).

    Args:
      state: initial state (see ``init``).
      mdp: the MDP.
      schedule: period schedule, ``schedule(n) -> K_n``.
      q_star: [S, A] reference optimal values (``value_iteration``).
      num_records: number of records R.
      record_every: samples between records.
      sampling: one of SAMPLING_MODES.
      step_size: inner-loop step size.

    Returns:
      (final state, Trace with [R] fields).
    """
    validation.check_shape("q_star", q_star, (mdp.num_states, mdp.num_actions))
    validation.check_finite("q_star", q_star)
    validation.check_positive_int("num_records", num_records)
    validation.check_positive_int("record_every", record_every)
    _check_sampling(sampling)
    _check_run_size(num_records, record_every)

    def record(st, _):
        st = run_steps(st, mdp, schedule, record_every, sampling, step_size)
        rec = Trace(samples=st.num_samples,
                    target_error=jnp.max(jnp.abs(st.target - q_star)),
                    q_error=jnp.max(jnp.abs(st.q - q_star)),
                    outer_iter=st.outer_iter)
        return st, rec

    return jax.lax.scan(record, state, None, length=num_records)


def samples_to_accuracy(trace_samples: Array, errors: Array, eps: float) -> Array:
    """Samples after which ``errors`` stays <= eps until the end of the run (inf if never).

    Args:
      trace_samples: [R] samples at each record.
      errors: [..., R] recorded errors.
      eps: accuracy threshold > 0.

    Returns:
      [...] float samples (``inf`` where the last record is still above eps).
    """
    validation.check_in_range("eps", eps, 0.0, low_inclusive=False)
    validation.check_shape("trace_samples", trace_samples, (np.shape(errors)[-1],))
    validation.check_finite("trace_samples", trace_samples)
    validation.check_in_range("trace_samples", trace_samples, 0.0)
    validation.check_in_range("errors", errors, 0.0)
    if not isinstance(errors, jax.core.Tracer) and np.any(np.isnan(np.asarray(errors))):
        raise ValueError(f"`errors` must not contain NaN (a NaN error would count as below "
                         f"eps), got {int(np.isnan(np.asarray(errors)).sum())} NaN entries.")
    above = errors > eps
    # Index of the last record above eps; the run "has converged" from the next one on.
    r = errors.shape[-1]
    last_above = jnp.where(above.any(-1), r - 1 - jnp.argmax(above[..., ::-1], axis=-1), -1)
    first_ok = last_above + 1
    samples = jnp.asarray(trace_samples, jnp.float32)
    return jnp.where(first_ok < r, samples[jnp.minimum(first_ok, r - 1)], jnp.inf)


def sampling_distribution(mdp: TabularMDP, sampling: str) -> np.ndarray:
    """[S, A] long-run probability mu(s, a) that a step updates (s, a).

    "generative": 1 / (S A); "trajectory": pi(s) / A with pi the stationary distribution
    of the uniform behaviour policy (``mdp.stationary_distribution``).
    """
    _check_sampling(sampling)
    check_mdp(mdp)
    n_s, n_a = mdp.num_states, mdp.num_actions
    if sampling == "generative":
        return np.full((n_s, n_a), 1.0 / (n_s * n_a))
    return np.repeat(stationary_distribution(mdp)[:, None] / n_a, n_a, axis=1)


def paper_sgd_step(mdp: TabularMDP, sampling: str) -> SGDStep:
    """The headline inner loop's step: ``schedules.sgd_step(xi)`` with xi = min mu(s, a)."""
    return sgd_step(float(sampling_distribution(mdp, sampling).min()))
