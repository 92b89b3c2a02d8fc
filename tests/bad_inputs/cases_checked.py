"""Every checked entry point, given a bad value inside a caller's transformation, raises
``jaxlab.core.CheckError`` (a ``ValueError``) naming the function and the argument, by
each way a caller may run it in checked mode:

* ``checked.jit``: the caller's ``jit`` through ``jaxlab.core.checked.jit``;
* ``eager vmap``: a bare ``jax.vmap`` of the call (the entry point's own boundary turns
  JAX's runtime error into the ``CheckError``);
* ``checkify``: ``jaxlab.core.checked.checkify(jax.jit(f))``.

Each case's expected text is "<function>: `<argument>`", the message's first words.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.attention import attention
from jaxlab.avatar import alignment, solvers
from jaxlab.core import checked, metrics, smc
from jaxlab.dllm import decoding
from jaxlab.gepc import residual
from jaxlab.rfo import critic, ppo
from tests.bad_inputs import cases_edges, cases_traced
from tests.bad_inputs.harness import Case, checks_on

KEY = jax.random.key(0)
W3 = np.array([0.2, 0.3, 0.5], np.float32)
N = 4
PLAN = (np.eye(N) * 0.2 + 0.01).astype(np.float32)
MASK = np.ones(N, bool)
CHECK_ERROR = (checked.CheckError,)


def _with(x, index, value):
    x = np.array(x, copy=True)
    x[index] = value
    return x


def _metrics(plan, truth):
    return alignment.alignment_metrics(plan, truth, MASK)["mrr"]


def _pairs(plan, tgt):
    return alignment.pair_metrics(plan, np.arange(N), tgt, MASK)["mrr"]


def _q_run(rewards):
    return cases_edges._q_run(rewards)


def _path_ll(answer):
    prompt = jnp.zeros((1, 1), jnp.int32)
    return decoding.path_log_likelihood(cases_traced.den, prompt, answer,
                                        jnp.array([[0, 1]]), mask_id=3)


# (function name as messages carry it, argument, the call, its bad arguments); the call
# takes arrays only, so it can be jitted and vmapped as it is.
SPECS = [
    ("jaxlab.core.smc.systematic", "weights", lambda w: smc.systematic(KEY, w, 4),
     (_with(W3, 1, np.nan),)),
    ("jaxlab.core.smc.stratified", "weights", lambda w: smc.stratified(KEY, w, 4), (-W3,)),
    ("jaxlab.core.smc.multinomial", "weights", lambda w: smc.multinomial(KEY, w, 4),
     (_with(W3, 0, np.inf),)),
    ("jaxlab.core.smc.residual", "weights", lambda w: smc.residual(KEY, w, 4), (-W3,)),
    ("jaxlab.core.smc.normalize_log_weights", "log_weights", smc.normalize_log_weights,
     (np.array([0.0, np.nan, 1.0], np.float32),)),
    ("jaxlab.core.smc.ess", "log_weights", smc.ess, (np.array([0.0, np.inf], np.float32),)),
    ("jaxlab.core.metrics.auroc", "labels", lambda lab: metrics.auroc(
        jnp.array([0.1, 0.2, 0.3, 0.9]), lab), (np.array([0, 2, 0, 1]),)),
    ("jaxlab.core.metrics.auroc", "scores", lambda s: metrics.auroc(s, jnp.array([0, 1, 1])),
     (np.array([0.1, np.nan, 0.3], np.float32),)),
    ("jaxlab.dllm.decode", "prompt", cases_traced._decode, (np.full((1, 1), 3, np.int32),)),
    ("jaxlab.dllm.decode_threshold", "prompt", cases_traced._threshold,
     (np.full((1, 1), 3, np.int32),)),
    ("jaxlab.dllm.path_log_likelihood", "answer", _path_ll, (np.array([[0, 3]], np.int32),)),
    ("jaxlab.dllm.path_smc.run_particles", "prompt", cases_traced._smc,
     (np.full((1, 1), 3, np.int32),)),
    ("jaxlab.dllm.sr_smc.run_particles", "prompt", cases_traced._sr_smc,
     (np.full((1, 1), 9, np.int32),)),
    ("jaxlab.rfo.critic.td_lambda_targets", "rewards", lambda r: critic.td_lambda_targets(
        r, jnp.ones(4), 0.9, 0.9), (np.full(3, np.nan, np.float32),)),
    ("jaxlab.rfo.critic.td_lambda_targets", "gamma", lambda g: critic.td_lambda_targets(
        jnp.ones(3), jnp.ones(4), g, 0.9), (np.float32(1.5),)),
    ("jaxlab.rfo.ppo.gae", "values", lambda v: ppo.gae(jnp.ones(3), v, 0.9, 0.9),
     (np.full(4, np.inf, np.float32),)),
    ("jaxlab.qlearning.make_mdp", "rewards", cases_traced._mdp_rewards,
     (np.full((2, 2), np.nan, np.float32),)),
    ("jaxlab.qlearning.run_steps", "mdp.rewards", _q_run,
     (np.full((2, 2), 1e37, np.float32),)),
    ("jaxlab.bco.run", "delta", cases_edges._bco_delta, (np.float32(2.0),)),
    ("jaxlab.avatar.solvers.entropic_solve", "cost", lambda c: solvers.entropic_solve(
        c, 0.1).plan, (np.full((2, 2), np.nan, np.float32),)),
    ("jaxlab.avatar.solvers.fgw_solve", "cost", lambda c: solvers.fgw_solve(
        c, jnp.eye(2), jnp.eye(2), 0.1).plan, (np.full((2, 2), np.inf, np.float32),)),
    ("jaxlab.gepc.residual.gepc_residuals", "x0", lambda x: residual.gepc_residuals(
        KEY, cases_traced._score, x, [0.5]), (np.full((1, 4, 4, 1), np.nan, np.float32),)),
    ("jaxlab.gepc.residual.consistency_features", "ts", lambda t: residual.consistency_features(
        KEY, cases_traced._score, jnp.zeros((1, 4, 4, 1)), t)[0],
     (np.array([1.5], np.float32),)),
    ("jaxlab.attention.attention", "q", lambda q: attention(q, cases_traced.ONES,
                                                            cases_traced.ONES),
     (np.full((1, 4, 1, 2), np.nan, np.float32),)),
    ("jaxlab.avatar.alignment.alignment_metrics", "plan", _metrics,
     (_with(PLAN, (0, 0), np.nan), np.arange(N))),
    ("jaxlab.avatar.alignment.alignment_metrics", "truth", _metrics,
     (PLAN, np.array([0, 1, 2, 7]))),
    ("jaxlab.avatar.alignment.alignment_metrics", "truth", _metrics,
     (PLAN, np.array([0, 0, 2, 3]))),
    ("jaxlab.avatar.alignment.pair_metrics", "plan", _pairs,
     (_with(PLAN, (1, 2), np.inf), np.arange(N))),
    ("jaxlab.avatar.alignment.pair_metrics", "tgt", _pairs, (PLAN, np.array([0, 1, 2, -1]))),
]


def by_checked_jit(fn, *args):
    with checks_on():
        return jax.block_until_ready(checked.jit(fn)(*args))


def by_eager_vmap(fn, *args):
    batched = [np.stack([a, a]) for a in args]
    with checks_on():
        return jax.block_until_ready(jax.vmap(fn)(*batched))


def by_checkify(fn, *args):
    with checks_on():
        return jax.block_until_ready(checked.checkify(jax.jit(fn))(*args))


WAYS = {"checked.jit": by_checked_jit, "eager vmap": by_eager_vmap,
        "checkify jit": by_checkify}
# A while loop under vmap takes neither a checked body nor a host callback (module
# docstring of jaxlab.core.checked): these run vmapped inside a checked.jit instead.
VMAP_IN_JIT = {"jaxlab.avatar.solvers.entropic_solve", "jaxlab.avatar.solvers.fgw_solve",
               "jaxlab.dllm.decode", "jaxlab.dllm.decode_threshold"}


def _way(where, how):
    if how == "eager vmap" and where in VMAP_IN_JIT:
        return lambda fn, *args: by_checked_jit(jax.vmap(fn), *[np.stack([a, a]) for a in args])
    return WAYS[how]


CASES = [Case(f"traced/{where.removeprefix('jaxlab.')}: bad `{arg}` #{i}, {how} (plain jit)"
              if how == "checked.jit" else
              f"traced/{where.removeprefix('jaxlab.')}: bad `{arg}` #{i}, under {how}",
              functools.partial(_way(where, how), fn, *args), f"{where}: `{arg}`",
              errors=CHECK_ERROR)
         for i, (where, arg, fn, args) in enumerate(SPECS) for how in WAYS]
