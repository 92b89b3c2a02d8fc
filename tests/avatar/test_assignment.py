"""``baselines.max_weight_assignment`` (topmatchings' solver, in JAX) against scipy's
``linear_sum_assignment`` on the weights topmatchings samples: Gumbel-perturbed log
row-normalised entropic plans, square and rectangular; no host callback in its program."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

from jaxlab.avatar import alignment, baselines, solvers
from jaxlab.core import checks


def _weights(seed, n, m, samples):
    k_cost, k_gumbel = jax.random.split(jax.random.key(seed))
    plan = solvers.entropic_solve(jax.random.uniform(k_cost, (n, m)), 0.05).plan
    logp = jnp.log(jnp.maximum(alignment.row_normalise(plan), 1e-30))
    return np.asarray(logp[None] + jax.random.gumbel(k_gumbel, (samples, n, m)))


def _scipy(w):
    """Each sample's maximum-weight assignment by scipy in float64 (unassigned rows: m)."""
    out = np.full(w.shape[:2], w.shape[2], np.int32)
    for b, wb in enumerate(np.asarray(w, np.float64)):
        rows, cols = scipy.optimize.linear_sum_assignment(wb, maximize=True)
        out[b, rows] = cols
    return out


@pytest.mark.parametrize("n, m", [(60, 60), (40, 52), (52, 40)])
def test_equals_scipy_on_perturbed_plans(n, m):
    for seed in range(2):
        w = _weights(seed, n, m, 24)
        got = np.asarray(jax.jit(baselines.max_weight_assignment)(w))
        np.testing.assert_array_equal(got, _scipy(w), err_msg=f"seed {seed}")


def test_ties_a_constant_matrix_and_bad_input():
    # scipy's answer for a constant matrix is the identity; one row of a batch of one
    w = np.zeros((1, 5, 5), np.float32)
    np.testing.assert_array_equal(np.asarray(baselines.max_weight_assignment(w))[0],
                                  _scipy(w)[0])
    with pytest.raises(ValueError, match="`w`"):
        baselines.max_weight_assignment(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="`w` must be finite"):
        baselines.max_weight_assignment(np.full((3, 3), np.nan, np.float32))


def test_topmatchings_program_has_no_host_callback():
    plan = jnp.full((6, 6), 1.0 / 36)
    with checks(False):
        text = jax.jit(lambda k, p: baselines.topmatchings_score(k, p, 4)).lower(
            jax.random.key(0), plan).as_text()
    assert "callback" not in text
