"""Bad values inside ``jit`` / ``vmap`` / ``scan`` at public entry points, in checked mode.

Each call runs with ``jaxlab.core.checks(True)``: wrapped once in
``jaxlab.core.checked.checkify`` (``in_checked_mode``), or under a plain ``jax.jit`` inside
``jaxlab.core.raise_check_errors()`` (``plain_jit``), where the error must arrive as
``jaxlab.core.CheckError`` itself.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab import qlearning
from jaxlab.attention import attention
from jaxlab.avatar import solvers
from jaxlab.core import checked, metrics, smc
from jaxlab.dllm import decoding, path_smc, sr_smc
from jaxlab.gepc import residual
from jaxlab.rfo import critic, ppo
from tests.bad_inputs.cases_edges import in_checked_mode
from tests.bad_inputs.harness import Case, checks_on

KEY = jax.random.key(0)
W3 = np.array([0.2, 0.3, 0.5], np.float32)
P2 = np.full((2, 2, 2), 0.5, np.float32)
NAN22 = np.full((2, 2), np.nan, np.float32)
CHECK_ERROR = (checked.CheckError,)


def plain_jit(fn, *args):
    """``jax.jit(fn)(*args)`` in checked mode, with no outer checkify: the failure surfaces
    from a host callback and ``raise_check_errors`` hands it out as ``CheckError``."""
    with checks_on(), checked.raise_check_errors():
        return jax.block_until_ready(jax.jit(fn)(*args))


def den(tokens):
    m, n = tokens.shape
    logits = jnp.broadcast_to(jnp.log(jnp.array([0.5, 0.3, 0.2, 1e-9])), (m, n, 4))
    return logits, jax.nn.one_hot(tokens, 4)


def _decode(prompt):
    return decoding.decode(KEY, den, prompt, 2, mask_id=3, vocab_size=4).answer


def _threshold(prompt):
    return decoding.decode_threshold(KEY, den, prompt, 2, mask_id=3, vocab_size=4).answer


def _path_ll(answer):
    prompt = jnp.zeros((1, 1), jnp.int32)
    return decoding.path_log_likelihood(den, prompt, answer, jnp.array([[0, 1]]), mask_id=3)


# The SMC decoders check the prompt in their ``init`` (``smc_decode`` / ``sr_smc_decode``
# call it first); tracing ``init`` alone keeps these calls cheap.
def _smc(prompt):
    alg = path_smc.smc(den, gen_length=2, num_particles=2, mask_id=3, vocab_size=4)
    return alg.init(KEY, prompt).log_weights


def _sr_smc(prompt):
    alg = sr_smc.sr_smc(den, gen_length=2, num_particles=2, mask_id=3, vocab_size=4,
                        block_length=2)
    return alg.init(KEY, prompt).log_weights


def _td(rewards, values, gamma, lam=0.9):
    return critic.td_lambda_targets(rewards, values, gamma, lam)


def _mdp_rewards(rewards):
    return qlearning.make_mdp(P2, rewards, 0.9).rewards


def _score(x, t):
    return -x


ONES = jnp.ones((1, 4, 1, 2))

CASES = [
    # resampling weights
    Case("smc.systematic: NaN weight, plain jit", lambda: plain_jit(
        lambda w: smc.systematic(KEY, w, 4), np.array([0.2, np.nan, 0.5], np.float32)),
        "`weights`", errors=CHECK_ERROR),
    Case("smc.multinomial: negative weight, plain jit", lambda: plain_jit(
        lambda w: smc.multinomial(KEY, w, 4), -W3), "`weights`", errors=CHECK_ERROR),
    Case("smc.residual: negative weight in a scan", lambda: in_checked_mode(
        jax.jit(lambda ws: jax.lax.scan(lambda c, w: (c, smc.residual(KEY, w, 4)), 0, ws)),
        np.array([W3, -W3])), "`weights`"),
    Case("smc.normalize_log_weights: NaN under jit", lambda: in_checked_mode(
        jax.jit(smc.normalize_log_weights), np.array([0.0, np.nan, 1.0], np.float32)),
        "`log_weights`"),
    Case("smc.normalize_log_weights: +inf, plain jit", lambda: plain_jit(
        smc.normalize_log_weights, np.array([0.0, np.inf], np.float32)), "`log_weights`",
        errors=CHECK_ERROR),
    Case("smc.ess: NaN under vmap", lambda: in_checked_mode(
        jax.vmap(smc.ess), np.array([[0.0, 1.0], [0.0, np.nan]], np.float32)),
        "`log_weights`"),
    Case("smc.ess: all -inf under jit", lambda: in_checked_mode(
        jax.jit(smc.ess), np.full(3, -np.inf, np.float32)), "`log_weights`"),
    # AUROC labels and scores
    Case("metrics.auroc: label 2 under jit", lambda: in_checked_mode(
        jax.jit(metrics.auroc), np.array([0.1, 0.2, 0.3, 0.9], np.float32),
        np.array([0, 2, 0, 1])), "`labels`"),
    Case("metrics.auroc: label -1 under vmap", lambda: in_checked_mode(
        jax.vmap(metrics.auroc), np.ones((2, 3), np.float32), np.array([[0, 1, 0],
                                                                        [-1, 1, 0]])),
        "`labels`"),
    Case("metrics.auroc: NaN score, plain jit", lambda: plain_jit(
        metrics.auroc, np.array([0.1, np.nan, 0.3], np.float32), np.array([0, 1, 1])),
        "`scores`", errors=CHECK_ERROR),
    # dllm prompts
    Case("dllm.decode: prompt equal to the mask id under jit", lambda: in_checked_mode(
        jax.jit(_decode), np.full((2, 1), 3, np.int32)), "`prompt`"),
    Case("dllm.decode: prompt outside the vocabulary under vmap", lambda: in_checked_mode(
        jax.vmap(lambda p: _decode(p[None])), np.array([[0], [7]], np.int32)), "`prompt`"),
    Case("dllm.decode: prompt equal to the mask id, plain jit", lambda: plain_jit(
        _decode, np.full((1, 1), 3, np.int32)), "`prompt`", errors=CHECK_ERROR),
    Case("dllm.decode_threshold: prompt equal to the mask id under jit", lambda: (
        in_checked_mode(jax.jit(_threshold), np.full((1, 1), 3, np.int32))), "`prompt`"),
    Case("dllm.path_log_likelihood: answer holding the mask id under jit", lambda: (
        in_checked_mode(jax.jit(_path_ll), np.array([[0, 3]], np.int32))), "`answer`"),
    Case("dllm.path_smc.run_particles: prompt equal to the mask id under jit", lambda: (
        in_checked_mode(jax.jit(_smc), np.full((1, 1), 3, np.int32))), "`prompt`"),
    Case("dllm.sr_smc.run_particles: prompt outside the vocabulary, plain jit", lambda: (
        plain_jit(_sr_smc, np.full((1, 1), 9, np.int32))), "`prompt`", errors=CHECK_ERROR),
    # TD(lambda) targets and GAE
    Case("rfo.td_lambda_targets: gamma 1.5 under jit", lambda: in_checked_mode(
        jax.jit(lambda g: _td(jnp.ones(3), jnp.ones(4), g)), np.float32(1.5)), "`gamma`"),
    Case("rfo.td_lambda_targets: NaN rewards under vmap", lambda: in_checked_mode(
        jax.vmap(lambda r: _td(r, jnp.ones(4), 0.9)), np.full((2, 3), np.nan, np.float32)),
        "`rewards`"),
    Case("rfo.td_lambda_targets: inf values in a scan", lambda: in_checked_mode(
        jax.jit(lambda vs: jax.lax.scan(lambda c, v: (c, _td(jnp.ones(3), v, 0.9)), 0, vs)),
        np.full((2, 4), np.inf, np.float32)), "`values`"),
    Case("rfo.td_lambda_targets: lam -0.5, plain jit", lambda: plain_jit(
        lambda lam: _td(jnp.ones(3), jnp.ones(4), 0.9, lam), np.float32(-0.5)), "`lam`",
        errors=CHECK_ERROR),
    Case("rfo.ppo.gae: NaN rewards under jit", lambda: in_checked_mode(
        jax.jit(lambda r: ppo.gae(r, jnp.ones(4), 0.9, 0.9)), np.full(3, np.nan, np.float32)),
        "`rewards`"),
    # MDP rewards and discounts
    Case("qlearning.make_mdp: NaN rewards under jit", lambda: in_checked_mode(
        jax.jit(_mdp_rewards), NAN22), "`rewards`"),
    Case("qlearning.make_mdp: rewards 1e37 under vmap", lambda: in_checked_mode(
        jax.vmap(_mdp_rewards), np.full((2, 2, 2), 1e37, np.float32)), "`rewards`"),
    Case("qlearning.make_mdp: gamma 1.0 under jit", lambda: in_checked_mode(
        jax.jit(lambda g: qlearning.make_mdp(P2, np.zeros((2, 2)), g).gamma),
        np.float32(1.0)), "`gamma`"),
    Case("qlearning.make_mdp: rows not summing to 1, plain jit", lambda: plain_jit(
        lambda p: qlearning.make_mdp(p, np.zeros((2, 2)), 0.9).transitions, P2 * 2),
        "`transitions`", errors=CHECK_ERROR),
    # OT costs
    Case("avatar.entropic_solve: NaN cost under jit", lambda: in_checked_mode(
        jax.jit(lambda c: solvers.entropic_solve(c, 0.1).plan), NAN22), "`cost`"),
    Case("avatar.entropic_solve: epsilon 0 under jit", lambda: in_checked_mode(
        jax.jit(lambda e: solvers.entropic_solve(jnp.eye(2), e).plan), np.float32(0.0)),
        "`epsilon`"),
    # (checkify cannot wrap a vmapped while loop, Sinkhorn's: the plain-jit path)
    Case("avatar.entropic_solve: inf cost under vmap, plain jit", lambda: plain_jit(
        jax.vmap(lambda c: solvers.entropic_solve(c, 0.1).plan),
        np.full((2, 2, 2), np.inf, np.float32)), "`cost`", errors=CHECK_ERROR),
    Case("avatar.fgw_solve: NaN cost under jit", lambda: in_checked_mode(
        jax.jit(lambda c: solvers.fgw_solve(c, jnp.eye(2), jnp.eye(2), 0.1).plan), NAN22),
        "`cost`"),
    # GEPC residuals
    Case("gepc.gepc_residuals: NaN image under jit", lambda: in_checked_mode(
        jax.jit(lambda x: residual.gepc_residuals(KEY, _score, x, [0.5])),
        np.full((1, 4, 4, 1), np.nan, np.float32)), "`x0`"),
    Case("gepc.gepc_residuals: time 1.5 under jit", lambda: in_checked_mode(
        jax.jit(lambda t: residual.gepc_residuals(KEY, _score, jnp.zeros((1, 4, 4, 1)), t)),
        np.array([1.5], np.float32)), "`ts`"),
    Case("gepc.consistency_features: inf image, plain jit", lambda: plain_jit(
        lambda x: residual.consistency_features(KEY, _score, x, [0.5])[0],
        np.full((1, 4, 4, 1), np.inf, np.float32)), "`x0`", errors=CHECK_ERROR),
    # attention (SALE and dense)
    Case("attention sale: NaN q under jit", lambda: in_checked_mode(
        jax.jit(lambda q: attention(q, ONES, ONES, impl="sale")),
        np.full((1, 4, 1, 2), np.nan, np.float32)), "`q`"),
    Case("attention dense: inf v under vmap", lambda: in_checked_mode(
        jax.vmap(lambda v: attention(ONES, ONES, v)),
        np.full((1, 1, 4, 1, 2), np.inf, np.float32)), "`v`"),
]

CASES = [c._replace(name=f"traced/{c.name}") for c in CASES]
