"""Bad calls at the limits: wrong kinds of input, empty and zero sizes, overflow at the
dtype's edge, shapes that do not fit, sizes that could never finish, and messages that
must name the argument the caller passed."""

import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab import bco, qlearning
from jaxlab.avatar import alignment, solvers
from jaxlab.bco import estimators
from jaxlab.core import metrics, smc
from jaxlab.dllm import decoding, evaluation, path_smc, poke
from jaxlab.gepc import ood, residual, scoring
from jaxlab.rfo import critic
from tests.bad_inputs.harness import Case

KEY = jax.random.key(0)
X0 = np.zeros((2, 4, 4, 1), np.float32)
P2 = np.full((2, 2, 2), 0.5, np.float32)
S4 = np.array([0.1, 0.2, 0.3, 0.9])
L4 = np.array([0, 1, 0, 1])


def den(tokens):
    m, n = tokens.shape
    logits = jnp.broadcast_to(jnp.log(jnp.array([0.5, 0.3, 0.2, 1e-9])), (m, n, 4))
    return logits, jax.nn.one_hot(tokens, 4)


def _score(x, t):
    return -x


def within_a_second(fn):
    """``fn()``, which must raise within a second (a size guard answers before any work)."""
    start = time.perf_counter()
    try:
        return fn()
    finally:
        if time.perf_counter() - start > 1.0:
            raise AssertionError(f"the size guard took {time.perf_counter() - start:.1f} s")


def _simulate(num_records, record_every=1):
    mdp = qlearning.make_mdp(P2, np.zeros((2, 2)), 0.9)
    state, schedule = qlearning.init(KEY, mdp), qlearning.schedules.constant(4)
    return within_a_second(lambda: qlearning.simulate(
        state, mdp, schedule, np.zeros((2, 2)), num_records, record_every))


def _smc(num_particles):
    return within_a_second(lambda: path_smc.smc_decode(
        KEY, den, np.zeros((2, 1), np.int32), 2, mask_id=3, vocab_size=4,
        num_particles=num_particles))


HUGE = np.linspace(1e37, 3e38, 30, dtype=np.float32)

CASES = [
    # Wrong kinds of input
    Case("metrics.auroc: complex scores", lambda: metrics.auroc(S4 + 0j, L4), "`scores`"),
    Case("metrics.auroc: string labels", lambda: metrics.auroc(S4, np.array(list("abab"))),
         "`labels`"),
    Case("smc.normalize_log_weights: complex", lambda: smc.normalize_log_weights(
        np.array([0.0, 1.0]) + 1j), "`log_weights`"),
    Case("dllm.pass_at_n: floats for booleans", lambda: evaluation.pass_at_n([[0.5, 0.2]]),
         "`correct`"),
    Case("dllm.pass_at_k: integers other than 0/1", lambda: evaluation.pass_at_k(
        np.array([[2, 0]]), 1), "`correct`"),
    Case("dllm.best_of_n_correct: float correctness", lambda: evaluation.best_of_n_correct(
        np.array([[0.0, 1.0]]), np.zeros((1, 2))), "`correct`"),
    Case("rfo.td_lambda_targets: complex rewards", lambda: critic.td_lambda_targets(
        np.ones(3) + 1j, np.ones(4), 0.9, 0.9), "`rewards`"),
    Case("avatar.entropic_solve: complex cost", lambda: solvers.entropic_solve(
        np.eye(2) + 0j, 0.1), "`cost`"),
    Case("gepc.gepc_residuals: complex images", lambda: residual.gepc_residuals(
        KEY, _score, X0 + 0j, [0.5]), "`x0`"),
    Case("gepc.auroc_with_ci: complex id_scores", lambda: ood.auroc_with_ci(
        KEY, np.ones(3) + 1j, np.ones(3), num_resamples=10), "`id_scores`"),
    # Empty and zero sizes
    Case("bco.box: empty", lambda: bco.box(np.zeros(0), np.zeros(0)), "`low`"),
    Case("gepc.gepc_residuals: no candidate times", lambda: residual.gepc_residuals(
        KEY, _score, X0, []), "`ts`"),
    Case("gepc.consistency_features: no candidate times", lambda: residual.consistency_features(
        KEY, _score, X0, np.zeros(0)), "`ts`"),
    Case("gepc.gepc_residuals: batch of 0 images", lambda: residual.gepc_residuals(
        KEY, _score, np.zeros((0, 4, 4, 1), np.float32), [0.5]), "`x0`"),
    Case("dllm.decode: (0, 1) prompt", lambda: decoding.decode(
        KEY, den, np.zeros((0, 1), np.int32), 2, mask_id=3, vocab_size=4), "`prompt`"),
    Case("dllm.smc_decode: (0, 1) prompt", lambda: path_smc.smc_decode(
        KEY, den, np.zeros((0, 1), np.int32), 2, mask_id=3, vocab_size=4, num_particles=2),
        "`prompt`"),
    Case("dllm.pass_at_n: no problems", lambda: evaluation.pass_at_n(np.zeros((0, 2), bool)),
         "`correct`"),
    Case("dllm.poke.evaluate: batch 0", lambda: poke.evaluate(None, None, None, batch=0),
         "`batch`"),
    Case("dllm.poke.evaluate: rollouts None", lambda: poke.evaluate(None, None, None),
         "`rollouts`"),
    Case("avatar.entropic_solve: (0, 3) cost", lambda: solvers.entropic_solve(
        np.zeros((0, 3)), 0.1), "`cost`"),
    Case("rfo.td_lambda_targets: T = 0", lambda: critic.td_lambda_targets(
        np.zeros(0), np.zeros(1), 0.9, 0.9), "`rewards`"),
    # Overflow at the dtype's edge
    Case("metrics.cumulative_regret: sums past float32", lambda: metrics.cumulative_regret(
        np.full(3, 3e38, np.float32), np.zeros(3, np.float32)), "`losses`"),
    Case("metrics.cumulative_regret: differences past float32", lambda: metrics.cumulative_regret(
        np.full(2, 3e38, np.float32), np.full(2, -3e38, np.float32)), "`losses`"),
    Case("rfo.td_lambda_targets: returns past float32", lambda: critic.td_lambda_targets(
        jnp.full(3, 3e38), jnp.full(4, 3e38), 0.9, 0.9), "`rewards`"),
    Case("rfo.td_lambda_targets: gamma 1 over a long horizon", lambda: critic.td_lambda_targets(
        jnp.full(8, 1e38), jnp.zeros(9), 1.0, 1.0), "`rewards`"),
    Case("gepc.kde_log_density: subnormal bandwidth", lambda: scoring.kde_log_density(
        jnp.ones((3, 2)), jnp.full(2, 1e-44), jnp.ones((2, 2))), "`bandwidth`"),
    # Shapes that do not fit
    Case("bco.estimators.two_point: scalar and vector", lambda: estimators.two_point(
        jnp.float32(1.0), jnp.ones(3), jnp.ones(2), 0.1), "`f_minus`"),
    Case("bco.estimators.two_point: vector values", lambda: estimators.two_point(
        jnp.ones(3), jnp.ones(3), jnp.ones(2), 0.1), "`f_plus`"),
    Case("bco.estimators.two_point: hint of another size", lambda: estimators.two_point(
        jnp.float32(1.0), jnp.float32(0.0), jnp.ones(2), 0.1, jnp.ones(3)), "`hint`"),
    Case("avatar.alignment_metrics: ks with 0", lambda: alignment.alignment_metrics(
        jnp.eye(3), jnp.arange(3), jnp.ones(3, bool), ks=(0, 1)), "`ks`"),
    Case("avatar.pair_metrics: ks with -1", lambda: alignment.pair_metrics(
        jnp.eye(3), jnp.arange(3), jnp.arange(3), jnp.ones(3, bool), ks=(-1,)), "`ks`"),
    Case("gepc.gepc_residuals: 2-D times", lambda: residual.gepc_residuals(
        KEY, _score, X0, np.full((1, 1), 0.5)), "`ts`"),
    # Sizes that could never finish: refused with an estimate, within a second
    Case("qlearning.simulate: num_records 10**9", lambda: _simulate(10**9), "`num_records`"),
    Case("qlearning.simulate: 10**10 samples overflow the counter", lambda: _simulate(
        10**5, 10**5), "`num_records`"),
    Case("dllm.smc_decode: num_particles 10**9", lambda: _smc(10**9), "`num_particles`"),
    # Messages that name the argument passed
    Case("gepc.auroc_with_ci: NaN in id_scores", lambda: ood.auroc_with_ci(
        KEY, np.array([0.1, np.nan, 0.3]), np.array([1.0, 2.0]), num_resamples=10),
        "`id_scores`"),
    Case("gepc.auroc_with_ci: NaN in ood_scores", lambda: ood.auroc_with_ci(
        KEY, np.array([0.1, 0.3]), np.array([1.0, np.nan]), num_resamples=10),
        "`ood_scores`"),
    Case("gepc.auroc_with_ci: empty id_scores", lambda: ood.auroc_with_ci(
        KEY, np.zeros(0), np.array([1.0, 2.0]), num_resamples=10), "`id_scores`"),
    Case("gepc.auroc_with_ci: empty ood_scores", lambda: ood.auroc_with_ci(
        KEY, np.ones(2), np.zeros(0), num_resamples=10), "`ood_scores`"),
    Case("gepc.fit_gmm: one row", lambda: scoring.fit_gmm(np.ones((1, 2))), "`x`"),
]

CASES = [c._replace(name=f"limits/{c.name}") for c in CASES]
