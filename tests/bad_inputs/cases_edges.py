"""Bad-input cases at the edges: extreme finite values, callback outputs, constructors that
must check as much as their siblings, and calls under ``jit`` / ``vmap`` in checked mode.

The traced section runs its calls inside ``jaxlab.core.checks(True)``, wrapped once in
``jaxlab.core.checked.checkify`` (the documented way to collect checked-mode errors from
a caller's ``jit`` / ``vmap``); one case shows the plain-``jit`` path (a host callback's
failure, handed out as ``CheckError`` by ``jaxlab.core.raise_check_errors``).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab import bco, qlearning
from jaxlab.attention import attention
from jaxlab.avatar import alignment, tasks
from jaxlab.bco import losses, msmwc
from jaxlab.core import checked, smc
from jaxlab.dllm import decoding, path_smc
from jaxlab.gepc import baselines, residual, scoring
from tests.bad_inputs.harness import Case, checks_on

KEY = jax.random.key(0)
MASK, V = 3, 4
PROMPT = np.zeros((2, 1), np.int32)
BALL = bco.ball(2)
P2 = np.full((2, 2, 2), 0.5, np.float32)


# --- dllm denoisers with bad outputs ----------------------------------------------------
def _logits(tokens, fill=None):
    m, n = tokens.shape
    base = jnp.log(jnp.array([0.5, 0.3, 0.2, 1e-9]))
    logits = jnp.broadcast_to(base, (m, n, V))
    if fill is not None:
        logits = logits.at[..., :MASK].set(fill)
    return logits, jax.nn.one_hot(tokens, V)


def batch_one(tokens):
    logits, hidden = _logits(tokens)
    return logits[:1], hidden[:1]


def short_length(tokens):
    logits, hidden = _logits(tokens)
    return logits[:, :-1], hidden


def int_logits(tokens):
    logits, hidden = _logits(tokens)
    return logits.astype(jnp.int32), hidden


def logits_only(tokens):
    return _logits(tokens)[0]


nan_logits = functools.partial(_logits, fill=jnp.nan)
pinf_logits = functools.partial(_logits, fill=jnp.inf)
ninf_logits = functools.partial(_logits, fill=-jnp.inf)


def dec(fn, **kw):
    return decoding.decode(KEY, fn, PROMPT, 2, mask_id=MASK, vocab_size=V, **kw)


def good_value(hidden, tokens):
    return jnp.zeros(tokens.shape[0])


def wrong_value(hidden, tokens):
    return jnp.zeros((tokens.shape[0], 2))


# --- bco / gepc callbacks -----------------------------------------------------------------
def bco_step(f):
    return bco.step(KEY, bco.init(KEY, BALL, 0.1), f, BALL, 0.1)


X0 = np.zeros((2, 4, 4, 1), np.float32)


def eps_nan(x, t):
    return x * jnp.nan


def eps_wrong(x, t):
    return x[:, :2]


def eps_int(x, t):
    return x.astype(jnp.int32)


# --- avatar -------------------------------------------------------------------------------
PATH4 = np.array([[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]], np.float64)
FEAT = np.ones((4, 2))
TRUTH = np.arange(4)


def _adj(i, j, value):
    a = PATH4.copy()
    a[i, j] = value
    return a


def from_adj(adj1=PATH4, adj2=PATH4, feat1=FEAT, feat2=FEAT, truth=TRUTH):
    return tasks.task_from_adjacency(adj1, adj2, feat1, feat2, truth)


# --- traced calls in checked mode -----------------------------------------------------------
def in_checked_mode(fn, *args):
    """``checked.checkify(fn)(*args)`` with checked mode on."""
    with checks_on():
        return checked.checkify(fn)(*args)


def plain_jit_checked(fn, *args):
    """``jax.jit(fn)(*args)`` with checked mode on, no outer checkify: inside
    ``raise_check_errors`` the host callback's failure arrives as ``CheckError``."""
    with checks_on(), checked.raise_check_errors():
        return jax.block_until_ready(jax.jit(fn)(*args))


def _resample(w):
    return smc.systematic(KEY, w, 4)


def _decode_nan(prompt):
    return dec(nan_logits, ).answer if prompt is None else decoding.decode(
        KEY, nan_logits, prompt, 2, mask_id=MASK, vocab_size=V).path_ll


def _q_run(rewards):
    mdp = qlearning.TabularMDP(jnp.asarray(P2), rewards, jnp.float32(0.9))
    state = qlearning.init(KEY, qlearning.make_mdp(P2, np.zeros((2, 2)), 0.9))
    return qlearning.run_steps(state, mdp, qlearning.schedules.constant(4), 8).q


def _bco_run(centers):
    seq = losses.QuadraticSeq(centers, jnp.float32(1.0))
    return bco.run(KEY, bco.gradient_variation(BALL, 0.1), seq, jnp.zeros(2)).loss


def _bco_delta(delta):
    learner = bco.gradient_variation(BALL, delta)
    seq = losses.QuadraticSeq(jnp.zeros((4, 2)), jnp.float32(1.0))
    return bco.run(KEY, learner, seq, jnp.zeros(2)).loss


W3 = np.array([0.2, 0.3, 0.5], np.float32)
R_HUGE = np.full((2, 2), 1e37, np.float32)

CASES = [
    # Extreme finite values
    Case("qlearning.make_mdp: rewards 1e37", lambda: qlearning.make_mdp(
        P2, np.full((2, 2), 1e37), 0.9), "`rewards`"),
    Case("qlearning.check_mdp: hand-built rewards 1e37", lambda: qlearning.check_mdp(
        qlearning.TabularMDP(jnp.asarray(P2), jnp.asarray(R_HUGE), jnp.float32(0.9))),
        "`mdp.rewards`"),
    Case("qlearning.value_iteration: rewards 1e37", lambda: qlearning.value_iteration(
        qlearning.TabularMDP(jnp.asarray(P2), jnp.asarray(R_HUGE), jnp.float32(0.9))),
        "`mdp.rewards`"),
    Case("bco.box: +-3e38", lambda: bco.box(np.full(2, -3e38), np.full(2, 3e38)), "`low`"),
    Case("bco.ball: radius 3e38", lambda: bco.ball(2, 3e38), "`radius`"),
    Case("bco.gradient_variation: delta 1e-45", lambda: bco.gradient_variation(BALL, 1e-45),
         "`delta`"),
    Case("bco.agarwal2010: delta 1e-12 at |x| ~ 1e4", lambda: bco.agarwal2010(
        bco.box(np.full(2, 1e4), np.full(2, 1e4 + 1.0)), 1e-12), "`delta`"),
    Case("bco.one_point_box: delta 1e-45", lambda: bco.one_point_box(
        bco.box(-np.ones(2), np.ones(2)), 1e-45, bco.step_rule()), "`delta`"),
    Case("bco.msmwc.run: losses 1e30", lambda: msmwc.run(
        np.ones(2) / 2, np.full(2, 0.01), np.full((3, 2), 1e30), np.zeros((3, 2))), "`losses`"),
    Case("bco.msmwc.run: NaN hint", lambda: msmwc.run(
        np.ones(2) / 2, np.full(2, 0.01), np.zeros((3, 2)), np.full((3, 2), np.nan)),
        "`hints`"),
    # Callback outputs
    Case("dllm.decode: denoiser returns batch 1 for batch 2", lambda: dec(batch_one),
         "`denoise_fn`"),
    Case("dllm.decode: denoiser drops a position", lambda: dec(short_length), "`denoise_fn`"),
    Case("dllm.decode: integer logits", lambda: dec(int_logits), "`denoise_fn`"),
    Case("dllm.decode: denoiser returns logits only", lambda: dec(logits_only),
         "`denoise_fn`"),
    Case("dllm.decode: NaN logits", lambda: dec(nan_logits), "`denoise_fn`"),
    Case("dllm.decode: +inf logits", lambda: dec(pinf_logits), "`denoise_fn`"),
    Case("dllm.decode: every non-mask logit -inf", lambda: dec(ninf_logits), "`denoise_fn`"),
    Case("dllm.decode_threshold: NaN logits", lambda: decoding.decode_threshold(
        KEY, nan_logits, PROMPT, 2, mask_id=MASK, vocab_size=V), "`denoise_fn`"),
    Case("dllm.path_log_likelihood: NaN logits", lambda: decoding.path_log_likelihood(
        nan_logits, PROMPT, np.zeros((2, 2), np.int32), np.tile([0, 1], (2, 1)),
        mask_id=MASK), "`denoise_fn`"),
    Case("dllm.smc_decode: value_fn of the wrong shape", lambda: path_smc.smc_decode(
        KEY, _logits, PROMPT, 2, mask_id=MASK, vocab_size=V, num_particles=2,
        value_fn=wrong_value), "`value_fn`"),
    Case("dllm.smc_decode: batch-1 denoiser", lambda: path_smc.smc_decode(
        KEY, batch_one, PROMPT, 2, mask_id=MASK, vocab_size=V, num_particles=2,
        value_fn=good_value), "`denoise_fn`"),
    Case("attention dense: NaN q", lambda: attention(
        jnp.full((1, 4, 1, 2), jnp.nan), jnp.ones((1, 4, 1, 2)), jnp.ones((1, 4, 1, 2))),
        "`q`"),
    Case("attention dense: inf k", lambda: attention(
        jnp.ones((1, 4, 1, 2)), jnp.full((1, 4, 1, 2), jnp.inf), jnp.ones((1, 4, 1, 2))),
        "`k`"),
    Case("attention sale: inf q", lambda: attention(
        jnp.full((1, 4, 1, 2), jnp.inf), jnp.ones((1, 4, 1, 2)), jnp.ones((1, 4, 1, 2)),
        impl="sale"), "`q`"),
    Case("attention sale: NaN v", lambda: attention(
        jnp.ones((1, 4, 1, 2)), jnp.ones((1, 4, 1, 2)), jnp.full((1, 4, 1, 2), jnp.nan),
        impl="sale"), "`v`"),
    Case("bco.step: loss callback returns a vector", lambda: bco_step(lambda x: x), "`f`"),
    Case("bco.step: loss callback returns NaN", lambda: bco_step(
        lambda x: jnp.sum(x) * jnp.nan), "`f`"),
    Case("bco.step: loss callback returns inf", lambda: bco_step(
        lambda x: jnp.sum(x) + jnp.inf), "`f`"),
    Case("gepc.score_norm: eps_fn returns NaN", lambda: baselines.score_norm(
        KEY, eps_nan, X0), "`eps_fn`"),
    Case("gepc.score_norm: eps_fn of the wrong shape", lambda: baselines.score_norm(
        KEY, eps_wrong, X0), "`eps_fn`"),
    Case("gepc.msma_features: integer eps", lambda: baselines.msma_features(
        eps_int, X0, [0.1, 0.2]), "`eps_fn`"),
    Case("gepc.diffpath_features: eps_fn returns NaN", lambda: baselines.diffpath_features(
        eps_nan, X0, num_steps=2), "`eps_fn`"),
    Case("gepc.gepc_residuals: score_fn returns NaN", lambda: residual.gepc_residuals(
        KEY, eps_nan, X0, [0.1]), "`score_fn`"),
    Case("gepc.gepc_residuals: integer scores", lambda: residual.gepc_residuals(
        KEY, eps_int, X0, [0.1]), "`score_fn`"),
    # Constructors that must check as much as their siblings
    Case("avatar.task_from_adjacency: asymmetric adj1", lambda: from_adj(
        adj1=_adj(0, 2, 1.0)), "`adj1`"),
    Case("avatar.task_from_adjacency: negative adj2", lambda: from_adj(
        adj2=-PATH4), "`adj2`"),
    Case("avatar.task_from_adjacency: NaN adj1", lambda: from_adj(
        adj1=_adj(0, 0, np.nan)), "`adj1`"),
    Case("avatar.task_from_adjacency: float truth", lambda: from_adj(
        truth=np.arange(4.0)), "`truth`"),
    Case("avatar.task_from_adjacency: truth not a permutation", lambda: from_adj(
        truth=np.array([0, 0, 1, 2])), "`truth`"),
    Case("avatar.task_from_adjacency: feat1 with 2 rows for 4 nodes", lambda: from_adj(
        feat1=np.ones((2, 4))), "`feat1`"),
    Case("avatar.task_from_adjacency: feat2 with other columns", lambda: from_adj(
        feat2=np.ones((4, 3))), "`feat2`"),
    Case("avatar.alignment_metrics: empty eval_mask", lambda: alignment.alignment_metrics(
        jnp.eye(3), jnp.arange(3), jnp.zeros(3, bool)), "`eval_mask`"),
    Case("avatar.pair_metrics: empty eval_mask", lambda: alignment.pair_metrics(
        jnp.eye(3), jnp.arange(3), jnp.arange(3), jnp.zeros(3, bool)), "`eval_mask`"),
    Case("gepc.fit: zero-spread features", lambda: scoring.fit(np.ones((5, 2, 3))),
         "`features`"),
    Case("qlearning.make_mdp: S = 0", lambda: qlearning.make_mdp(
        np.zeros((0, 2, 0)), np.zeros((0, 2)), 0.9), "`transitions`"),
    Case("qlearning.make_mdp: A = 0", lambda: qlearning.make_mdp(
        np.zeros((2, 0, 2)), np.zeros((2, 0)), 0.9), "`transitions`"),
    Case("qlearning.make_mdp: list gamma", lambda: qlearning.make_mdp(
        P2, np.zeros((2, 2)), [0.9]), "`gamma`"),
    Case("qlearning.make_mdp: string gamma", lambda: qlearning.make_mdp(
        P2, np.zeros((2, 2)), "0.9"), "`gamma`"),
    # Traced calls (jit / vmap / scan) in checked mode
    Case("traced smc.systematic: NaN weight under jit", lambda: in_checked_mode(
        jax.jit(_resample), np.array([0.2, np.nan, 0.5], np.float32)), "`weights`"),
    Case("traced smc.residual: negative weight under vmap", lambda: in_checked_mode(
        jax.vmap(lambda w: smc.residual(KEY, w, 4)), np.array([W3, -W3])), "`weights`"),
    Case("traced smc.multinomial: subnormal weights under jit", lambda: in_checked_mode(
        jax.jit(lambda w: smc.multinomial(KEY, w, 4)), (W3 * 1e-39).astype(np.float32)),
        "`weights`"),
    Case("traced smc.stratified: NaN weight in a scan", lambda: in_checked_mode(
        jax.jit(lambda ws: jax.lax.scan(lambda c, w: (c, smc.stratified(KEY, w, 4)), 0, ws)),
        np.array([W3, [np.nan, 1.0, 1.0]], np.float32)), "`weights`"),
    Case("traced dllm.decode: NaN logits under jit", lambda: in_checked_mode(
        jax.jit(_decode_nan), PROMPT), "`denoise_fn`"),
    Case("traced dllm.decode: NaN logits under vmap", lambda: in_checked_mode(
        jax.vmap(lambda p: _decode_nan(p[None])), PROMPT), "`denoise_fn`"),
    Case("traced qlearning.run_steps: rewards 1e37 under jit", lambda: in_checked_mode(
        jax.jit(_q_run), R_HUGE), "`mdp.rewards`"),
    Case("traced qlearning.run_steps: NaN reward under vmap", lambda: in_checked_mode(
        jax.vmap(_q_run), np.stack([np.zeros((2, 2)), np.full((2, 2), np.nan)]).astype(
            np.float32)), "`mdp.rewards`"),
    Case("traced bco.run: NaN loss centres under jit", lambda: in_checked_mode(
        jax.jit(_bco_run), np.full((4, 2), np.nan, np.float32)), "`seq`"),
    Case("traced bco.run: delta outside the domain under jit", lambda: in_checked_mode(
        jax.jit(_bco_delta), np.float32(2.0)), "`delta`"),
    Case("traced bco.run: NaN delta under vmap", lambda: in_checked_mode(
        jax.vmap(_bco_delta), np.array([0.1, np.nan], np.float32)), "`delta`"),
    # A fresh function: a caller's jit keeps the trace of its first call (module docstring
    # of jaxlab.core.checked), and _resample was traced inside checkify above.
    Case("traced smc.systematic: plain jit (host callback error)", lambda: plain_jit_checked(
        lambda w: smc.systematic(KEY, w, 4), np.array([0.2, np.nan, 0.5], np.float32)),
        "`weights`", errors=(checked.CheckError,)),
]

CASES = [c._replace(name=f"edges/{c.name}") for c in CASES]
