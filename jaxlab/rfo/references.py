"""Reference lines of a task: what open-loop action sequences earn, for reading a
trainer's return.

For a task and an episode length T, each reference is an open-loop action sequence
[T, act_dim] and its return (the sum of the T rewards, stopped at a failed step as in the
trainers' evaluation), averaged over ``num_envs`` environments from the task's reset
distribution:

* ``zero_action``: a = 0 throughout;
* ``best_constant``: one constant action a = tanh(u), u [act_dim] optimised by gradient
  ascent (Adam) on the return through the simulator from ``restarts`` starts: the best
  ``restarts`` of ``candidates`` random u ~ N(0, 4 I) (scored by their return, forward
  only); the restart with the best final return on the optimisation environments is
  kept;
* ``best_sinusoid``: the best of ``candidates`` open-loop sinusoid gaits of the family

      a_k(t) = offset_k + amp sin(2 pi f t dt + phase_k),   t = 0 .. T - 1,

  amp ~ U(0, 1), f ~ U(``freq_hz``) [Hz], phase_k ~ U(0, 2 pi), offset_k ~ U(-(1 - amp),
  1 - amp) (0 when ``offsets`` is false), dt = ``control_dt`` (the task's control period),
  drawn from the key (random search; every gait stays inside [-1, 1]);
* ``trajectory_optimisation``: a whole sequence a = tanh(U), U [T, act_dim] from
  ``init_scale`` N(0, I), optimised by Adam through the simulator for ``iterations``
  steps (the last iterate is kept);
* ``posture_switch``: a = 0 for the first ``switch_step`` steps, then one constant action
  tanh(u) optimised as in ``best_constant`` (on a task that pays only after a settle
  window, the one posture change a timed policy could still be paid for).

The optimisers run on ``num_envs`` environments drawn from ``fold_in(key, 0)``; every
reported return (``Reference.ret``) is measured afterwards on ``num_envs`` other
environments from ``fold_in(key, 1)`` (held out), and ``Reference.fit_ret`` on the
optimisation environments. Gradient entries that are not finite (contacts) are zeroed
before the Adam step, as in the trainers, and counted (``Reference.nonfinite_steps``).

Every function is pure (``task``, the sizes and the optimisers' settings static, so the
checks below see them) and jitted; ``trace`` rolls an
action sequence out from one state and records ``trace_fn`` of the physics state
(``com_fn``: the soft quadruped's centre of mass) for plots. What is ours: all of it.

Checks (eager): ``sinusoid_actions``: ``phase`` [A], ``offset`` [A], all finite;
``trace``: ``trace_fn`` callable; ``episode_length``, ``num_envs``, ``restarts``, ``iterations``,
``candidates`` positive ints, ``switch_step`` an int in [0, episode_length), ``lr``,
``init_scale`` and ``control_dt`` > 0, ``freq_hz`` 0 <= low <= high, ``actions``
[T, act_dim] and finite when concrete (ValueError naming the argument; TypeError for a
``task`` that is not an ``envs.Task``).
"""

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxlab.core import validation
from jaxlab.core.types import Array, PRNGKey
from jaxlab.rfo import envs

__all__ = ["Reference", "best_constant", "best_sinusoid", "com_fn", "episode_returns",
           "posture_switch", "sinusoid_actions", "trace", "trajectory_optimisation",
           "zero_action"]


class Reference(NamedTuple):
    """One reference line.

    Attributes:
      ret: mean return over the held-out environments (scalar).
      fit_ret: mean return over the optimisation environments (scalar).
      actions: [T, act_dim] the open-loop action sequence.
      history: the optimisation's mean return per iteration [iterations] (of the kept
        restart), or every candidate's [candidates] for the random search, or [0].
      nonfinite_steps: int32, optimisation steps whose gradient had a non-finite entry.
    """

    ret: Array
    fit_ret: Array
    actions: Array
    history: Array
    nonfinite_steps: Array


def _check_task(task) -> None:
    if not isinstance(task, envs.Task):
        raise TypeError(f"`task` must be an envs.Task, got {type(task).__name__}.")


def _check_sizes(**sizes) -> None:
    for name, value in sizes.items():
        validation.check_positive_int(name, value)


def _check_positive(**values) -> None:
    for name, value in values.items():
        validation.check_in_range(name, value, 0.0, None, low_inclusive=False)
        validation.check_finite(name, value)


def _reset(key: PRNGKey, task: envs.Task, num_envs: int) -> envs.EnvState:
    return jax.vmap(lambda k: envs.reset(k, task))(jax.random.split(key, num_envs))


def _rewards(task: envs.Task, state: envs.EnvState, actions: Array) -> Array:
    """[T] rewards of one environment under ``actions`` [T, A], 0 after a failed step."""
    def one(s, a):
        s1, r = envs.step(task, s, a)
        return s1, (r, s1.done)

    _, (r, done) = jax.lax.scan(one, state, actions)
    if task.resets_on_done:
        r = jnp.where(_alive(done) > 0, r, 0.0)
    return r


def _alive(done: Array) -> Array:
    """[T] 1 up to and including the first failed step, 0 after."""
    return jnp.cumprod(jnp.concatenate([jnp.ones_like(done[:1]), 1.0 - done[:-1]]))


def _mean_return(task: envs.Task, states: envs.EnvState, actions: Array) -> Array:
    return jnp.mean(jax.vmap(lambda s: jnp.sum(_rewards(task, s, actions)))(states))


def episode_returns(key: PRNGKey, task: envs.Task, actions: Array, num_envs: int) -> Array:
    """[num_envs] returns of ``actions`` [T, act_dim] from ``num_envs`` resets drawn from
    ``key`` (``envs.reset`` of ``jax.random.split(key, num_envs)``)."""
    _check_task(task)
    _check_sizes(num_envs=num_envs)
    _check_actions(task, actions)
    states = _reset(key, task, num_envs)
    return jax.vmap(lambda s: jnp.sum(_rewards(task, s, actions)))(states)


def _check_actions(task: envs.Task, actions) -> None:
    validation.check_ndim("actions", actions, 2)
    validation.check_shape("actions", actions, (None, task.act_dim))
    validation.check_finite("actions", actions)


def _envs(key: PRNGKey, task: envs.Task, num_envs: int):
    """(optimisation environments, held-out environments)."""
    return (_reset(jax.random.fold_in(key, 0), task, num_envs),
            _reset(jax.random.fold_in(key, 1), task, num_envs))


def _finish(task, fit_states, eval_states, actions, history, bad) -> Reference:
    return Reference(_mean_return(task, eval_states, actions),
                     _mean_return(task, fit_states, actions), actions, history,
                     jnp.asarray(bad, jnp.int32))


def _ascend(objective: Callable, u0: Array, iterations: int, lr: float):
    """Adam ascent of ``objective(u)`` from ``u0``: (last u, [iterations] objective values,
    count of steps with a non-finite gradient entry)."""
    opt = optax.adam(lr)

    def it(carry, _):
        u, s, bad = carry
        value, g = jax.value_and_grad(objective)(u)
        finite = jnp.all(jnp.isfinite(g))
        g = jnp.where(jnp.isfinite(g), g, 0.0)
        upd, s = opt.update(-g, s, u)
        return (optax.apply_updates(u, upd), s, bad + (~finite)), value

    (u, _, bad), values = jax.lax.scan(it, (u0, opt.init(u0), jnp.int32(0)), None,
                                       length=iterations)
    return u, values, bad


@functools.partial(jax.jit, static_argnames=("task", "episode_length", "num_envs"))
def zero_action(key: PRNGKey, task: envs.Task, episode_length: int,
                num_envs: int = 4) -> Reference:
    """The zero action for ``episode_length`` steps (module doc)."""
    _check_task(task)
    _check_sizes(episode_length=episode_length, num_envs=num_envs)
    fit, held = _envs(key, task, num_envs)
    actions = jnp.zeros((episode_length, task.act_dim))
    return _finish(task, fit, held, actions, jnp.zeros(0), 0)


def _constant_actions(u: Array, episode_length: int, switch_step: int) -> Array:
    a = jnp.broadcast_to(jnp.tanh(u), (episode_length, u.shape[0]))
    return a.at[:switch_step].set(0.0) if switch_step else a


def _best_posture(key, task, episode_length, num_envs, restarts, iterations, lr,
                  switch_step, candidates) -> Reference:
    fit, held = _envs(key, task, num_envs)
    pool = 2.0 * jax.random.normal(jax.random.fold_in(key, 2),
                                   (max(candidates, restarts), task.act_dim))
    scores = jax.vmap(lambda u: _mean_return(task, fit, _constant_actions(
        u, episode_length, switch_step)))(pool)
    u0 = pool[jnp.argsort(-jnp.where(jnp.isfinite(scores), scores, -jnp.inf))[:restarts]]

    def one(u):
        return _ascend(lambda v: _mean_return(task, fit, _constant_actions(
            v, episode_length, switch_step)), u, iterations, lr)

    us, histories, bad = jax.vmap(one)(u0)
    finals = jax.vmap(lambda u: _mean_return(task, fit, _constant_actions(
        u, episode_length, switch_step)))(us)
    best = jnp.argmax(jnp.where(jnp.isfinite(finals), finals, -jnp.inf))
    actions = _constant_actions(us[best], episode_length, switch_step)
    return _finish(task, fit, held, actions, histories[best], bad[best])


@functools.partial(jax.jit, static_argnames=("task", "episode_length", "num_envs",
                                             "restarts", "iterations", "candidates", "lr"))
def best_constant(key: PRNGKey, task: envs.Task, episode_length: int, *, num_envs: int = 4,
                  restarts: int = 4, iterations: int = 50, lr: float = 0.1,
                  candidates: int = 32) -> Reference:
    """The best constant action found by gradient ascent (module doc).

    Args:
      key: draws the environments and the restarts' starts.
      task: the task.
      episode_length: T.
      num_envs: environments to optimise on (and as many held out).
      restarts: independent starts (optimised in parallel).
      iterations: Adam steps per restart.
      lr: Adam's learning rate on u (a = tanh(u)).
      candidates: random u ~ N(0, 4 I) scored to pick the starts (the best ``restarts``;
        at least ``restarts`` are drawn).

    Returns:
      ``Reference`` (``history``: the kept restart's return per iteration).
    """
    _check_task(task)
    _check_sizes(episode_length=episode_length, num_envs=num_envs, restarts=restarts,
                 iterations=iterations, candidates=candidates)
    _check_positive(lr=lr)
    return _best_posture(key, task, episode_length, num_envs, restarts, iterations, lr, 0,
                         candidates)


@functools.partial(jax.jit, static_argnames=("task", "episode_length", "switch_step",
                                             "num_envs", "restarts", "iterations",
                                             "candidates", "lr"))
def posture_switch(key: PRNGKey, task: envs.Task, episode_length: int, switch_step: int, *,
                   num_envs: int = 4, restarts: int = 4, iterations: int = 50,
                   lr: float = 0.1, candidates: int = 32) -> Reference:
    """Zero action for ``switch_step`` steps, then the best constant action found by
    gradient ascent for the rest of the episode (module doc; arguments as
    ``best_constant``)."""
    _check_task(task)
    _check_sizes(episode_length=episode_length, num_envs=num_envs, restarts=restarts,
                 iterations=iterations, candidates=candidates)
    if (isinstance(switch_step, bool) or not isinstance(switch_step, int)
            or not 0 <= switch_step < episode_length):
        raise ValueError(f"`switch_step` must be an int in [0, episode_length="
                         f"{episode_length}), got {switch_step!r}.")
    _check_positive(lr=lr)
    return _best_posture(key, task, episode_length, num_envs, restarts, iterations, lr,
                         switch_step, candidates)


def sinusoid_actions(amp: Array, freq: Array, phase: Array, offset: Array,
                     episode_length: int, control_dt: float) -> Array:
    """[T, A] a_k(t) = offset_k + amp sin(2 pi freq t control_dt + phase_k) (module doc).

    Args:
      amp, freq: scalars (amplitude, frequency in Hz).
      phase, offset: [A].
      episode_length: T.
      control_dt: seconds per step.
    """
    _check_sizes(episode_length=episode_length)
    _check_positive(control_dt=control_dt)
    validation.check_ndim("phase", phase, 1)
    validation.check_shape("offset", offset, (jnp.shape(phase)[0],))
    for name, value in (("amp", amp), ("freq", freq), ("phase", phase), ("offset", offset)):
        validation.check_finite(name, value)
    t = jnp.arange(episode_length, dtype=jnp.float32)[:, None] * control_dt
    return offset + amp * jnp.sin(2.0 * jnp.pi * freq * t + phase)


@functools.partial(jax.jit, static_argnames=("task", "episode_length", "num_envs",
                                             "candidates", "offsets", "control_dt",
                                             "freq_hz"))
def best_sinusoid(key: PRNGKey, task: envs.Task, episode_length: int, *,
                  candidates: int = 100, num_envs: int = 4, control_dt: float = 0.02,
                  freq_hz: tuple[float, float] = (0.5, 4.0),
                  offsets: bool = True) -> Reference:
    """The best of ``candidates`` random sinusoid gaits (module doc).

    Args:
      key: draws the environments and the candidates.
      task: the task.
      episode_length: T.
      candidates: N gaits drawn from the family.
      num_envs: environments each gait is scored on (and as many held out for the best).
      control_dt: the task's control period [s] (0.02 for the soft quadruped).
      freq_hz: (low, high) of the uniform frequency draw [Hz].
      offsets: whether the family has per-muscle offsets.

    Returns:
      ``Reference`` (``history``: every candidate's mean return [candidates]).
    """
    _check_task(task)
    _check_sizes(episode_length=episode_length, num_envs=num_envs, candidates=candidates)
    _check_positive(control_dt=control_dt)
    lo, hi = freq_hz
    validation.check_in_range("freq_hz", lo, 0.0, None)
    validation.check_in_range("freq_hz", hi, lo, None)
    fit, held = _envs(key, task, num_envs)
    ka, kf, kp, ko = jax.random.split(jax.random.fold_in(key, 2), 4)
    a_dim = task.act_dim
    amp = jax.random.uniform(ka, (candidates,))
    freq = jax.random.uniform(kf, (candidates,), minval=lo, maxval=hi)
    phase = jax.random.uniform(kp, (candidates, a_dim), maxval=2.0 * jnp.pi)
    room = (1.0 - amp)[:, None]
    offset = (jax.random.uniform(ko, (candidates, a_dim), minval=-1.0, maxval=1.0) * room
              if offsets else jnp.zeros((candidates, a_dim)))
    acts = jax.vmap(lambda *p: sinusoid_actions(*p, episode_length, control_dt))(
        amp, freq, phase, offset)
    acts = jnp.clip(acts, -1.0, 1.0)  # round-off only: |offset| + amp <= 1
    scores = jax.vmap(lambda a: _mean_return(task, fit, a))(acts)
    best = jnp.argmax(jnp.where(jnp.isfinite(scores), scores, -jnp.inf))
    return _finish(task, fit, held, acts[best], scores, 0)


@functools.partial(jax.jit, static_argnames=("task", "episode_length", "num_envs",
                                             "iterations", "lr", "init_scale"))
def trajectory_optimisation(key: PRNGKey, task: envs.Task, episode_length: int, *,
                            num_envs: int = 4, iterations: int = 100, lr: float = 0.05,
                            init_scale: float = 0.1) -> Reference:
    """An open-loop action sequence optimised by Adam through the simulator (module doc).

    Args:
      key: draws the environments and the start U ~ ``init_scale`` N(0, I).
      task: the task.
      episode_length: T.
      num_envs: environments to optimise on (and as many held out).
      iterations: Adam steps.
      lr: Adam's learning rate on U (a = tanh(U)).
      init_scale: standard deviation of the start.

    Returns:
      ``Reference`` (``history``: the return per iteration, before each step).
    """
    _check_task(task)
    _check_sizes(episode_length=episode_length, num_envs=num_envs, iterations=iterations)
    _check_positive(lr=lr, init_scale=init_scale)
    fit, held = _envs(key, task, num_envs)
    u0 = init_scale * jax.random.normal(jax.random.fold_in(key, 2),
                                        (episode_length, task.act_dim))
    u, history, bad = _ascend(lambda v: _mean_return(task, fit, jnp.tanh(v)), u0,
                              iterations, lr)
    return _finish(task, fit, held, jnp.tanh(u), history, bad)


@functools.partial(jax.jit, static_argnames=("task", "trace_fn"))
def trace(task: envs.Task, state: envs.EnvState, actions: Array,
          trace_fn: Callable) -> tuple[Array, Array]:
    """Rolls ``actions`` [T, act_dim] out from one environment ``state``.

    Returns:
      (rewards [T] (0 after a failed step), ``trace_fn`` of the physics state at steps
      0 .. T, stacked [T + 1, ...]).
    """
    _check_task(task)
    _check_actions(task, actions)
    if not callable(trace_fn):
        raise TypeError(f"`trace_fn` must be a function of the physics state, got "
                        f"{type(trace_fn).__name__}.")

    def one(s, a):
        s1, r = envs.step(task, s, a)
        return s1, (r, s1.done, trace_fn(s1.pipeline_state))

    _, (r, done, tr) = jax.lax.scan(one, state, actions)
    if task.resets_on_done:
        r = jnp.where(_alive(done) > 0, r, 0.0)
    first = trace_fn(state.pipeline_state)
    return r, jnp.concatenate([first[None], tr], 0)


@functools.cache
def com_fn() -> Callable[[object], Array]:
    """The soft quadruped's centre of mass [3] of a physics state with node positions
    ``x`` (``soft_quadruped`` and ``soft_quadruped_gait``: the same body); one function
    per process, so it can be a static argument of ``trace``."""
    from jaxlab.rfo.softbody import quadruped

    body = quadruped.soft_quadruped().body
    return lambda ps: quadruped.center_of_mass(body, ps.x)
