"""Two-point ensembles for dynamic and universal regret.

A meta-learner (Hedge, or optimistic Hedge, with an adaptive rate) mixes N base learners
of ``learners``' optimistic-OGD core. All share one two-point query per round at the mixture
x_t = sum_i p_i x_{t,i} (in X_delta by convexity) and one two-point estimate g_t; every
base plays optimistically with the hint g_{t-1};
each base updates with g_t, and the meta-learner is charged the surrogate losses

    l_{t,i} = <g_t, x_{t,i} - x_t> + lam_i / 2 ||x_{t,i} - x_t||^2,

linear for convex bases and strongly convex for bases tuned to lam_i > 0 (the
Sword / Maler-style surrogate, Zhang et al. 2020-2022). Dynamic regret: bases with
fixed steps eta_i = eta_min 2^i. Universal regret: one convex base plus bases for a grid
of lam, so the ensemble adapts to convex or strongly convex losses without knowing.

Meta-learners (``meta`` argument; ``optimistic=True`` is ``meta="optimistic_hedge"``). Plain
Hedge: p_t propto exp(-lr_t L_{t-1}),
L_{t-1} = sum_{s<t} l_s, lr_t = meta_scale sqrt(ln N / (1 + sum_{s<t} range(l_s)^2)).
Optimistic Hedge (Rakhlin & Sridharan 2013; Syrgkanis et al. 2015): p_t propto
exp(-lr_t (L_{t-1} + m_t)) with the hint m_t = l_{t-1} (the previous surrogate vector)
and lr_t = meta_scale sqrt(ln N / (1 + sum_{s<t} range(l_s - m_s)^2)): its meta regret
scales with sum ||l_t - l_{t-1}||_inf^2, the meta-level gradient variation that the
gradient-variation universal / dynamic bounds of arXiv 2602.04761 need (the paper builds
on Yan, Zhao, Zhou 2023 and MsMwC, whose exact meta-learner and its correction terms we
could not read: the paper's text is not in our corpora). This optimistic-Hedge choice, the
adaptive rate and the hint are ours. ``meta="msmwc"``: MsMwC (Chen, Luo, Wei 2021; see
``jaxlab.bco.msmwc``), optimistic OMD with a weighted entropy (a rate per base), the
correction 32 eta_i (l_{t,i} - m_{t,i})^2 and the same hint m_t = l_{t-1}, uniform prior;
its per-base adaptive rates are ours (``msmwc.adaptive_rates``).

Every constructor returns a ``jaxlab.core.types.Algorithm`` like ``learners``' ones:
``init(key, x0=None) -> EnsembleState`` (key not used), ``step(key, state, f) ->
(EnsembleState, RoundInfo)`` (a ``learners.PredrawnStep``: the key draws the round's
direction; ``run(..., predraw=True)`` draws all of them first).

Checks (eager): ``domain`` / ``delta`` as in ``learners``; ``rules`` stacked with N >= 1;
``meta_scale`` > 0; ``optimistic`` a bool (TypeError); ``meta`` one of ``META``;
``num_rounds``, ``num_bases`` >= 1; every ``lams`` > 0; ``x0`` in ``domain`` at ``init``.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.bco import domains, estimators, msmwc
from jaxlab.bco.learners import (
    BanditState,
    PredrawnStep,
    RoundInfo,
    StepRule,
    _advance,
    _init,
)
from jaxlab.core import validation
from jaxlab.core.types import Algorithm, Array, PRNGKey

__all__ = ["EnsembleState", "META", "ensemble", "dynamic_ensemble", "universal_ensemble"]


class EnsembleState(NamedTuple):
    """bases: stacked [N] BanditState; cum_loss: [N]; sum_range2: meta-rate accumulator;
    hint: [d] the previous estimate g_{t-1}, shared by the bases; last_loss: [N] the
    previous surrogate vector l_{t-1} (the optimistic meta-learners' hint, zeros at t=1);
    meta: the MsMwC state (``msmwc.MsMwCState``; unused by Hedge)."""

    bases: BanditState
    cum_loss: Array
    sum_range2: Array
    hint: Array
    last_loss: Array
    meta: msmwc.MsMwCState


META = ("hedge", "optimistic_hedge", "msmwc")


def ensemble(domain, delta: float, rules: StepRule, meta_scale: float = 1.0,
             optimistic: bool = False, meta: str | None = None) -> Algorithm:
    """A meta-learner over base learners with stacked step rules ``rules`` ([N] leaves).

    Args:
      domain: a ``Ball`` or ``Box``.
      delta: exploration radius, 0 < delta < inner radius.
      rules: StepRule whose leaves are [N] arrays (one base learner each).
      meta_scale: multiplies the meta-learner's adaptive rate sqrt(ln N / (1 + sum range^2)).
      optimistic: optimistic Hedge with hint m_t = l_{t-1} (else plain Hedge).
      meta: "hedge", "optimistic_hedge" or "msmwc" (default: from ``optimistic``).

    Returns:
      ``Algorithm(init, step)``: ``init(key, x0=None) -> EnsembleState``;
      ``step(key, state, f) -> (EnsembleState, RoundInfo)``.
    """
    play_domain = domains.shrunk(domain, delta)
    if not isinstance(optimistic, bool):
        raise TypeError(f"`optimistic` must be a bool, got {type(optimistic).__name__}.")
    if meta is None:
        meta = "optimistic_hedge" if optimistic else "hedge"
    validation.check_one_of("meta", meta, META)
    if optimistic and meta != "optimistic_hedge":
        raise ValueError(f"`optimistic=True` contradicts `meta`={meta!r}.")
    validation.check_in_range("meta_scale", meta_scale, 0.0, np.inf, low_inclusive=False,
                              high_inclusive=False)
    n = int(np.shape(rules.scale)[0]) if np.ndim(rules.scale) else 0
    if n < 1:
        raise ValueError("`rules` must be a stacked StepRule with a leading axis of size >= 1.")
    d = domain.dim
    log_n = float(np.log(max(n, 2)))

    base_init = _init(play_domain, domain)

    def init(key: PRNGKey, x0: Array | None = None) -> EnsembleState:
        base = base_init(key, x0)
        bases = jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), base)
        return EnsembleState(bases, jnp.zeros(n), jnp.float32(0.0), jnp.zeros_like(base.xhat),
                             jnp.zeros(n), msmwc.init(np.full(n, 1.0 / n)))

    def draw(key: PRNGKey) -> Array:
        return estimators.sphere(key, d)

    def apply(u: Array, state: EnsembleState, f) -> tuple[EnsembleState, RoundInfo]:
        m = state.hint
        etas = jax.vmap(lambda r, b: r(b.sum_var, b.t + 1))(rules, state.bases)
        xs = jax.vmap(lambda b, e: play_domain.project(b.xhat - e * m))(state.bases, etas)
        lr = meta_scale * jnp.sqrt(log_n / (1.0 + state.sum_range2))
        meta_hint = (jnp.zeros_like(state.last_loss) if meta == "hedge"
                     else state.last_loss)
        if meta == "msmwc":
            rates = msmwc.adaptive_rates(state.meta, meta_scale)
            p = msmwc.play(state.meta, meta_hint, rates)
        else:
            p = jax.nn.softmax(-lr * (state.cum_loss + meta_hint))
        x = p @ xs
        fp, fm = f(x + delta * u), f(x - delta * u)
        g = estimators.two_point(fp, fm, u, delta)
        diff = xs - x
        surrogate = diff @ g + 0.5 * rules.lam * jnp.sum(diff**2, -1)
        bases = jax.vmap(lambda b, e: _advance(b, g, m, e, 1.0, play_domain))(
            state.bases, etas)
        new = EnsembleState(
            bases=bases,
            cum_loss=state.cum_loss + surrogate,
            sum_range2=state.sum_range2 + jnp.ptp(surrogate - meta_hint) ** 2,
            hint=g,
            last_loss=surrogate,
            meta=(msmwc.update(state.meta, surrogate, meta_hint,
                               msmwc.capped_rates(rates, surrogate, meta_hint))
                  if meta == "msmwc" else state.meta),
        )
        return new, RoundInfo(x, 0.5 * (fp + fm), g)

    return Algorithm(init, PredrawnStep(draw, apply))


def _stack(rules: list[StepRule]) -> StepRule:
    return jax.tree.map(lambda *xs: jnp.stack(xs), *rules)


def dynamic_ensemble(domain, delta: float, num_rounds: int, num_bases: int | None = None,
                     optimistic: bool = False, meta: str | None = None) -> Algorithm:
    """Fixed-step bases eta_i = D / sqrt(T) * 2^i, i = 0..N-1 (N ~ log2 sqrt(T) + 1);
    ``optimistic`` selects optimistic Hedge as the meta-learner, ``meta`` any of ``META``."""
    validation.check_positive_int("num_rounds", num_rounds)
    if num_bases is None:
        num_bases = int(np.ceil(0.5 * np.log2(num_rounds))) + 1
    validation.check_positive_int("num_bases", num_bases)
    eta0 = domain.diameter / np.sqrt(num_rounds)
    inf = jnp.float32(jnp.inf)
    rules = [StepRule(inf, jnp.float32(0.0), jnp.float32(eta0 * 2.0**i))
             for i in range(num_bases)]
    return ensemble(domain, delta, _stack(rules), optimistic=optimistic, meta=meta)


def universal_ensemble(domain, delta: float, lams=(1.0, 0.5, 0.25, 0.125, 0.0625),
                       optimistic: bool = False, meta: str | None = None) -> Algorithm:
    """One convex (adaptive) base plus one base per strong-convexity guess in ``lams``;
    ``optimistic`` selects optimistic Hedge as the meta-learner, ``meta`` any of ``META``."""
    lams = [float(v) for v in lams]
    for v in lams:
        validation.check_in_range("lams", v, 0.0, low_inclusive=False)
    inf, dia = jnp.float32(jnp.inf), jnp.float32(domain.diameter)
    rules = [StepRule(dia, jnp.float32(0.0), inf)]
    rules += [StepRule(dia, jnp.float32(v), inf) for v in lams]
    return ensemble(domain, delta, _stack(rules), optimistic=optimistic, meta=meta)
