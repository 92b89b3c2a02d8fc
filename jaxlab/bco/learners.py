"""Bandit learners as pure ``init`` / ``step`` pairs (optax / blackjax style).

Every constructor returns a ``jaxlab.core.types.Algorithm``::

    learner = gradient_variation(domain, delta)
    state = learner.init(key, x0)              # State (= BanditState); x0 defaults to the
                                               # domain's centre, the key is not used
    state, info = learner.step(key, state, f)  # Info (= RoundInfo); f: [d] -> [] loss

``step``'s key draws the round's exploration direction; ``f`` is queried only where bandit
feedback allows (two points, or one for ``one_point_box``).
Module-level ``init(key, domain, delta, x0=None)`` and ``step(key, state, f, domain,
delta, rule=None, optimistic=True)`` are the two-point learner with its hyperparameters
passed explicitly (blackjax style).

All learners share one core, optimistic projected OGD on the shrunk domain
X_delta = (1 - delta / r) X (arXiv 2602.04761, the round of its algorithm):

    x_t        = Proj_{X_delta}[xhat_t - eta_t M_t]              (play, with hint M_t)
    g_t        = bandit estimate of grad f_t around x_t
    xhat_{t+1} = Proj_{X_delta}[xhat_t - eta_t g_t]

    ====================== ============  ============================================
    learner                hint M_t      eta_t (convex)
    ====================== ============  ============================================
    ``gradient_variation`` g_{t-1}       D / sqrt(1 + S_t)
    ``ogd_sqrt_d_step``    g_{t-1}       D / sqrt(d (1 + S_t))   (control; see below)
    ``agarwal2010``        0             D / sqrt(1 + S_t)        (AdaGrad-norm OGD)
    ====================== ============  ============================================

with S_t = sum_{s<t} ||g_s - M_s||^2: for the optimistic learners the *non-consecutive*
variation sum ||g_s - g_{s-1}||^2 of estimates built from independent directions,
for the plain one sum ||g_s||^2. ``StepRule(lam > 0)`` gives eta_t = 1 / (lam t) for
lam-strongly convex losses; ``eta_max`` caps the step (fixed-step dynamic-regret bases).
``one_point_box`` is the one-point linear learner on hyper-rectangles (estimators.py).

Provenance. From arXiv 2602.04761 (as summarised in our design notes; the paper's text is not in
our corpora): the round (optimistic play with M_t = g_{t-1}, two-point estimate from an
independent direction, lazy projected update on X_delta) and the *shape* of the steps,
eta_t proportional to D / sqrt(1 + S_t) (convex) and 1 / (lam t) (strongly convex). Ours:
the constant 1 in front of D / sqrt(1 + S_t) (the paper's constant is unknown to us; the
experiments therefore tune a multiplier per (learner, d) on validation problems, see
experiments/bco.py), and ``ogd_sqrt_d_step`` (a control; Chiang et al. 2013 could not be
read). Plain two-point OGD with an AdaGrad-norm step follows Agarwal, Dekel, Xiao (2010)
in its estimator; the adaptive step is ours. No official code exists for these papers.

Checks (eager, when the learner is built or ``init`` is called): ``domain`` is a Ball /
Box, 0 < ``delta`` < inner radius, ``hint`` known, ``beta`` in (0, 1], ``scale`` and
``eta_max`` > 0, ``lam`` >= 0 (``lam`` = 0 selects the convex rule; strongly convex rules
need ``lam`` > 0), ``x0`` of shape [d], finite and inside ``domain``. Nothing is checked
per round inside the scan.
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.bco import domains, estimators
from jaxlab.core import checked, validation
from jaxlab.core.keys import as_key
from jaxlab.core.types import Algorithm, Array, PRNGKey

__all__ = ["HINTS", "StepRule", "step_rule", "State", "Info", "PredrawnStep", "two_point",
    "gradient_variation", "ogd_sqrt_d_step", "agarwal2010", "init", "step", "one_point_box"]

# M_t = 0, g_{t-1}, or an EMA of g (one-point). "previous" is the EMA with beta = 1.
HINTS = ("none", "previous", "ema")


class StepRule(NamedTuple):
    """eta_t = min(eta_max, 1/(lam t) if lam > 0 else scale / sqrt(1 + S_t))."""

    scale: Array
    lam: Array
    eta_max: Array

    def __call__(self, sum_var: Array, t: Array) -> Array:
        adaptive = self.scale / jnp.sqrt(1.0 + sum_var)
        strong = 1.0 / (jnp.maximum(self.lam, 1e-30) * jnp.maximum(t, 1))
        return jnp.minimum(self.eta_max, jnp.where(self.lam > 0, strong, adaptive))


def step_rule(scale: float = 1.0, lam: float = 0.0, eta_max: float = float("inf")) -> StepRule:
    """Builds a ``StepRule``: eta_t = min(eta_max, 1 / (lam t) if lam > 0 else scale /
    sqrt(1 + S_t)).

    A ``StepRule`` is a pytree of three scalars, so ``jax.vmap`` over ``scale`` (or a
    learner built inside ``jit`` from traced values) sweeps step sizes in one program.

    Args:
      scale: > 0, about the domain's diameter.
      lam: >= 0, a strong-convexity guess (0: the adaptive rule).
      eta_max: > 0, a cap on every step.

    Returns:
      ``StepRule`` of float32 scalars (traced arguments are not range-checked).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab import bco
      >>> seq = bco.losses.drifting_quadratic(jax.random.key(0), 100, 4, drift=0.01)
      >>> def final_regret(scale):
      ...     learner = bco.two_point(bco.ball(4), 0.05, bco.step_rule(scale))
      ...     info = bco.run(jax.random.key(1), learner, seq, jnp.zeros(4))
      ...     return bco.regret(info, seq, bco.ball(4))[-1]
      >>> jax.jit(jax.vmap(final_regret))(jnp.array([0.5, 1.0, 2.0])).shape
      (3,)
    """
    validation.check_in_range("scale", scale, 0.0, low_inclusive=False)
    validation.check_in_range("lam", lam, 0.0)
    validation.check_in_range("eta_max", eta_max, 0.0, low_inclusive=False)
    return StepRule(jnp.float32(scale), jnp.float32(lam), jnp.float32(eta_max))


class BanditState(NamedTuple):
    """xhat: [d] lazy iterate; hint: [d] EMA (1 - beta) m + beta g of the estimates, i.e.
    g_{t-1} for beta = 1; sum_var: S_t; t: rounds played (int32)."""

    xhat: Array
    hint: Array
    sum_var: Array
    t: Array


class RoundInfo(NamedTuple):
    """x: [d] played centre; loss: loss charged this round; g: [d] gradient estimate."""

    x: Array
    loss: Array
    g: Array


State = BanditState
Info = RoundInfo


def _static(x):
    """A concrete scalar as a Python float (kept traced under a caller's ``jit``)."""
    value = validation.concrete_float(x)
    return x if value is None else value


def _check_loss_value(name: str, value) -> None:
    """A round's loss value: a scalar (static, ValueError naming ``name``); finite when
    concrete (an eager step) and, in checked mode, when traced."""
    if jnp.shape(value) != ():
        raise ValueError(f"`{name}` must return a scalar loss, got shape {jnp.shape(value)}.")
    validation.check_finite(name, value)
    checked.check(jnp.isfinite(value), f"`{name}` returned a non-finite loss " "{v}.", v=value)


def _check_common(domain, delta, hint, beta):
    if hint not in HINTS:
        raise ValueError(f"`hint` must be one of {HINTS}, got {hint!r}.")
    validation.check_in_range("beta", beta, 0.0, 1.0, low_inclusive=False)
    return domains.shrunk(domain, delta)


def _current_hint(state: BanditState, hint: str) -> Array:
    return jnp.zeros_like(state.xhat) if hint == "none" else state.hint


def _advance(state, g, m, eta, beta, play_domain) -> BanditState:
    return BanditState(
        xhat=play_domain.project(state.xhat - eta * g),
        hint=(1.0 - beta) * state.hint + beta * g,
        sum_var=state.sum_var + jnp.sum((g - m) ** 2),
        t=state.t + 1,
    )


def _init(play_domain, domain=None) -> Callable[..., BanditState]:
    """``init(key, x0=None) -> BanditState`` (deterministic: the key is not used)."""
    domain = play_domain if domain is None else domain

    def init(key: PRNGKey, x0: Array | None = None) -> BanditState:
        """State before round 1 at ``x0`` ([d], default the domain's centre); ``key`` is
        taken for the uniform API and not used."""
        del key
        x0 = domain.center if x0 is None else x0
        validation.check_shape("x0", x0, (play_domain.dim,))
        domains.check_inside("x0", x0, domain)
        x0 = jnp.asarray(x0, jnp.float32)
        return BanditState(play_domain.project(x0), jnp.zeros_like(x0), jnp.float32(0.0),
                           jnp.int32(0))

    return init


class PredrawnStep:
    """A round ``step(key, state, f)`` split as ``apply(draw(key), state, f)``.

    ``draw(key) -> u`` is the round's only use of its key (the direction), so
    ``run(..., predraw=True)`` can draw all T directions in one vectorised call before the
    scan (``jax.vmap(draw)(keys)``: the same directions as drawing them round by round) and
    scan ``apply`` over them (``run``'s default; measurements in ``run``).
    Calling the object is the ordinary ``step``.
    """

    def __init__(self, draw: Callable[[PRNGKey], Array],
                 apply: Callable[..., tuple[BanditState, RoundInfo]]):
        self.draw = draw
        self.apply = apply

    def __call__(self, key: PRNGKey, state: BanditState, f) -> tuple[BanditState, RoundInfo]:
        return self.apply(self.draw(key), state, f)


def two_point(domain, delta: float, rule: StepRule,
              optimistic: bool | Array = True) -> Algorithm:
    """Two-point bandit learner; the loss charged is (f(x + delta u) + f(x - delta u)) / 2.

    Args:
      domain: a ``Ball`` or ``Box``.
      delta: exploration radius, 0 < delta < inner radius of the domain.
      rule: step-size rule.
      optimistic: use the previous estimate g_{t-1} as the hint M_t (else M_t = 0). A
        Python bool picks the program; a boolean scalar array (e.g. traced under
        ``vmap``) selects the hint at run time, so the optimistic and the plain learner
        share one compiled program.

    Returns:
      ``Algorithm(init, step)``: ``init(key, x0=None) -> BanditState``;
      ``step(key, state, f) -> (BanditState, RoundInfo)``, key: the direction u (a
      ``PredrawnStep``: ``run(..., predraw=True)`` draws every direction before its scan).
    """
    static = isinstance(optimistic, bool | np.bool_)
    if not static:
        validation.check_shape("optimistic", optimistic, ())
    hint = "previous" if not static or optimistic else "none"
    play_domain = _check_common(domain, delta, hint, 1.0)
    d = domain.dim

    def draw(key: PRNGKey) -> Array:
        return estimators.sphere(key, d)

    def apply(u: Array, state: BanditState, f) -> tuple[BanditState, RoundInfo]:
        m = _current_hint(state, hint)
        if not static:
            m = jnp.where(optimistic, m, jnp.zeros_like(m))
        eta = rule(state.sum_var, state.t + 1)
        x = play_domain.project(state.xhat - eta * m)
        checked.check((delta > 0) & (delta < domain.inner_radius),
                      "`delta` must lie in (0, inner radius of the domain), got {d}.", d=delta)
        fp, fm = f(x + delta * u), f(x - delta * u)
        _check_loss_value("f", fp)
        _check_loss_value("f", fm)
        g = estimators.two_point(fp, fm, u, delta)
        return _advance(state, g, m, eta, 1.0, play_domain), RoundInfo(x, 0.5 * (fp + fm), g)

    return Algorithm(_init(play_domain, domain), PredrawnStep(draw, apply))


def gradient_variation(domain, delta: float, rule: StepRule | None = None) -> Algorithm:
    """Optimistic two-point OGD, hint g_{t-1}, step from the estimates' variation.

    Default rule: eta_t = D / sqrt(1 + sum ||g_s - g_{s-1}||^2), D the diameter.
    """
    rule = step_rule(_static(domain.diameter)) if rule is None else rule
    return two_point(domain, delta, rule, optimistic=True)


def ogd_sqrt_d_step(domain, delta: float, rule: StepRule | None = None) -> Algorithm:
    """Optimistic two-point OGD with its step divided by sqrt(d) (a *control*, not Chiang
    et al. 2013).

    Earlier versions called this learner ``chiang2013``. It is the same update as
    ``gradient_variation`` (hint g_{t-1}) with eta_t = D / sqrt(d (1 + S_t)). Chiang, Lee,
    Lu (COLT 2013, "Beating bandits in gradually evolving worlds") could not be read here:
    only its PMLR abstract is reachable (proceedings.mlr.press/v30/Chiang13.html), so its
    algorithm and constants are not implemented and no number of this learner is a number
    of that paper. The 1/sqrt(d) factor is our stand-in for a d^2 sqrt(V_T) tuning.
    """
    rule = step_rule(_static(domain.diameter)) if rule is None else rule
    rule = rule._replace(scale=rule.scale / jnp.sqrt(float(domain.dim)))
    return two_point(domain, delta, rule, optimistic=True)


def agarwal2010(domain, delta: float, rule: StepRule | None = None) -> Algorithm:
    """Plain two-point OGD (Agarwal, Dekel, Xiao 2010), AdaGrad-norm step by default."""
    rule = step_rule(_static(domain.diameter)) if rule is None else rule
    return two_point(domain, delta, rule, optimistic=False)


def init(key: PRNGKey, domain, delta: float, x0: Array | None = None) -> BanditState:
    """The two-point learners' initial state (``two_point(domain, delta, ...).init``).

    Args:
      key: taken for the uniform API; not used (the state is deterministic).
      domain: a ``Ball`` or ``Box``.
      delta: exploration radius, 0 < delta < inner radius of the domain.
      x0: [d] starting point in ``domain`` (default its centre), projected onto the
        shrunk domain (1 - delta / r) X.

    Returns:
      ``BanditState`` before round 1.
    """
    key = as_key(key)
    return _init(domains.shrunk(domain, delta), domain)(key, x0)


def step(key: PRNGKey, state: BanditState, f, domain, delta: float,
         rule: StepRule | None = None,
         optimistic: bool = True) -> tuple[BanditState, RoundInfo]:
    """One round of the two-point learner (``two_point(domain, delta, rule,
    optimistic).step``): ``gradient_variation``'s round by default, ``agarwal2010``'s with
    ``optimistic=False``.

    Args:
      key: PRNG key of the round; draws the direction u on the unit sphere.
      state: current ``BanditState``.
      f: the round's loss, [d] -> [], queried at x +- delta u.
      domain: a ``Ball`` or ``Box``.
      delta: exploration radius, 0 < delta < inner radius of the domain.
      rule: step-size rule; default eta_t = D / sqrt(1 + S_t), D the diameter.
      optimistic: hint M_t = g_{t-1} (else 0).

    Returns:
      (next ``BanditState``, ``RoundInfo`` of the round).
    """
    key = as_key(key)
    rule = step_rule(_static(domain.diameter)) if rule is None else rule
    return two_point(domain, delta, rule, optimistic).step(key, state, f)


def one_point_box(domain: domains.Box, delta: float, rule: StepRule, hint: str = "ema",
                  beta: float | None = None) -> Algorithm:
    """One-point bandit *linear* optimization on a box; charged loss f(y), y the query.

    Args:
      domain: a ``Box``.
      delta: exploration size along one coordinate, 0 < delta < min half-width.
      rule: step-size rule.
      hint: "ema" (gradient-variation version) or "none" (plain one-point baseline).
      beta: EMA rate; default delta^2 / (d^2 D^2) (stable tracking, see estimators.py).

    Returns:
      ``Algorithm(init, step)`` as in ``two_point``; the key picks the queried coordinate
      and sign.
    """
    if not isinstance(domain, domains.Box):
        raise ValueError(f"`domain` must be a Box for one-point BLO, got {type(domain).__name__}.")
    validation.check_in_range("delta", delta, 0.0,
                              validation.concrete_float(domain.inner_radius),
                              low_inclusive=False, high_inclusive=False)
    if hint == "previous":
        raise ValueError("`hint` must be 'ema' or 'none' for one_point_box.")
    domains.shrunk(domain, delta)  # checks delta (resolution) before the default beta
    d = domain.dim
    if beta is None:
        beta = jnp.minimum(1.0, delta**2 / (d**2 * domain.diameter**2) * 4.0)
        beta = _static(beta)
    play_domain = _check_common(domain, delta, hint, beta)

    def step(key: PRNGKey, state: BanditState, f) -> tuple[BanditState, RoundInfo]:
        m = _current_hint(state, hint)
        eta = rule(state.sum_var, state.t + 1)
        x = play_domain.project(state.xhat - eta * m)
        i, s = estimators.coordinate_query(key, d)
        y = x + s * delta * jax.nn.one_hot(i, d)
        fy = f(y)
        _check_loss_value("f", fy)
        g = estimators.one_point_box(fy, y, i, s, delta, m)
        return _advance(state, g, m, eta, beta, play_domain), RoundInfo(x, fy, g)

    return Algorithm(_init(play_domain, domain), step)
