"""Checked mode (``jaxlab.core.checks``): value checks inside jit / vmap / scan."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import bco, qlearning
from jaxlab.core import CheckError, checked, checks, smc
from jaxlab.dllm import decoding

KEY = jax.random.key(0)
W = np.array([0.2, 0.3, 0.5], np.float32)


def test_setter_and_context_manager():
    before = checked.enabled()
    with checks(True):
        assert checked.enabled()
        with checks(False):
            assert not checked.enabled()
        assert checked.enabled()
    assert checked.enabled() == before
    setter = checks(not before)
    try:
        assert checked.enabled() == (not before)
    finally:
        checks(setter.previous)
    assert checked.enabled() == before
    with pytest.raises(TypeError, match="`enabled`"):
        checks(1)


def test_env_var_switches_it_on():
    code = "from jaxlab.core import checked; print(checked.enabled())"
    env = {**os.environ, "JAXLAB_CHECKS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, cwd=os.path.dirname(os.path.dirname(
                             os.path.dirname(os.path.abspath(__file__)))))
    assert out.stdout.strip() == "True"


def test_check_is_a_noop_outside_checked_bodies():
    # No checkify around: a failing check must not raise or stage anything.
    checked.check(jnp.bool_(False), "never raised")
    assert jax.jit(lambda x: (checked.check(x > 0, "x"), x)[1])(-1.0) == -1.0


@pytest.mark.parametrize("name", sorted(smc.RESAMPLERS))
def test_results_unchanged_by_checked_mode(name):
    fn = smc.RESAMPLERS[name]
    plain = fn(KEY, W, 6)
    with checks(True):
        eager = fn(KEY, W, 6)
        traced = checked.checkify(jax.jit(lambda w: fn(KEY, w, 6)))(W)
    np.testing.assert_array_equal(plain, eager)
    np.testing.assert_array_equal(plain, traced)


def _denoiser(tokens, scale=1.0):
    m, n = tokens.shape
    base = jnp.log(jnp.array([0.5, 0.3, 0.2, 1e-9])) * scale
    return jnp.broadcast_to(base, (m, n, 4)), jax.nn.one_hot(tokens, 4)


def test_decode_unchanged_and_flagged_under_jit():
    prompt = np.zeros((2, 1), np.int32)

    def run(p, scale):
        return decoding.decode(KEY, lambda t: _denoiser(t, scale), p, 2, mask_id=3,
                               vocab_size=4).answer

    plain = run(prompt, 1.0)
    with checks(True):
        ok = checked.checkify(jax.jit(lambda p: run(p, 1.0)))(prompt)
        with pytest.raises(CheckError, match="jaxlab.dllm.decode: `denoise_fn`"):
            checked.checkify(jax.jit(lambda p: run(p, jnp.nan)))(prompt)
    np.testing.assert_array_equal(plain, ok)
    # Without checked mode the jitted call is not inspected (documented): no error.
    with checks(False):
        jax.block_until_ready(jax.jit(lambda p: run(p, jnp.nan))(prompt))


def test_eager_decode_flag_is_in_the_info():
    alg = decoding.decoder(lambda t: _denoiser(t, jnp.nan), gen_length=2, mask_id=3)
    state = alg.init(KEY, np.zeros((2, 1), np.int32))
    _, info = alg.step(KEY, state)
    np.testing.assert_array_equal(info.nonfinite_logits, [True, True])


def test_qlearning_and_bco_runs_unchanged():
    mdp = qlearning.garnet(KEY, num_states=3, num_actions=2, branching=2, gamma=0.9)
    state = qlearning.init(KEY, mdp)
    sched = qlearning.schedules.constant(4)
    seq = bco.losses.drifting_quadratic(KEY, 8, 2, 0.1)
    learner = bco.gradient_variation(bco.ball(2), 0.1)
    plain_q = qlearning.run_steps(state, mdp, sched, 16).q
    plain_l = bco.run(KEY, learner, seq, jnp.zeros(2)).loss
    with checks(True):
        q = qlearning.run_steps(state, mdp, sched, 16).q
        loss = bco.run(KEY, learner, seq, jnp.zeros(2)).loss
    np.testing.assert_array_equal(plain_q, q)
    np.testing.assert_array_equal(plain_l, loss)


def test_traced_delta_does_not_crash_checks():
    ball = bco.ball(2)
    seq = bco.losses.drifting_quadratic(KEY, 4, 2, 0.1)

    def run(delta):
        return bco.run(KEY, bco.gradient_variation(ball, delta), seq, jnp.zeros(2)).loss

    np.testing.assert_allclose(jax.jit(run)(0.1), run(0.1), rtol=1e-6)
    box = bco.box(-np.ones(2), np.ones(2))
    jax.jit(lambda d: bco.one_point_box(box, d, bco.step_rule()).init(KEY).xhat)(0.1)


def test_a_check_under_vmap_raises_from_the_compiled_batch():
    """Outside a ``checked.checkify`` wrapper, a failed check in one element of a jitted
    vmap raises when the batch runs (the host callback maps over the batch)."""
    keys = jax.random.split(jax.random.key(0), 64)
    weights = jnp.ones((64, 4)).at[37, 1].set(jnp.nan)
    batch = jax.jit(jax.vmap(lambda k, w: smc.systematic(k, w, 4)))
    with checks(True), pytest.raises(Exception, match="`weights` must be finite"):
        jax.block_until_ready(batch(keys, weights))
    with checks(True):  # the same batch without the NaN runs through
        assert batch(keys, jnp.ones((64, 4))).shape == (64, 4)


def test_raise_check_errors_hands_out_the_check_error_of_a_plain_jit():
    """Under a caller's plain ``jit`` JAX re-raises the host callback's failure as its own
    runtime error; inside ``raise_check_errors`` it is the ``CheckError`` (same text, JAX's
    error chained), and any other exception passes unchanged."""
    bad = np.array([0.5, np.nan], np.float32)
    with checks(True):
        f = jax.jit(lambda w: smc.systematic(jax.random.key(0), w, 2))
        with pytest.raises(Exception) as plain:
            jax.block_until_ready(f(bad))
        assert not isinstance(plain.value, CheckError)
        assert "`weights` must be finite" in str(plain.value)
        with pytest.raises(CheckError, match=r"^jaxlab\.core\.smc\.systematic: `weights` must "
                                             r"be finite\. \[checked mode\]$") as caught:
            with checked.raise_check_errors():
                jax.block_until_ready(f(bad))
        assert caught.value.__cause__ is not None
        assert not isinstance(caught.value.__cause__, CheckError)

    @checked.raise_check_errors()
    def other():
        raise RuntimeError("not a check")

    with pytest.raises(RuntimeError, match="not a check"):
        other()


def test_guard_checks_traced_arguments_only_in_checked_mode():
    """``guard``: traced values are checked in checked mode (eagerly given values are the
    eager checks' job), and nothing is added outside checked mode."""
    from jaxlab.core import metrics

    labels = np.array([0, 2, 1])
    f = jax.jit(lambda s, lab: metrics.auroc(s, lab))
    with checks(False):
        assert np.isfinite(float(f(np.ones(3, np.float32), labels)))
    with checks(True), pytest.raises(CheckError, match="`labels` must be booleans or 0/1"):
        checked.checkify(jax.jit(lambda s, lab: metrics.auroc(s, lab)))(
            np.ones(3, np.float32), labels)
    assert "jaxlab.core.metrics.auroc" in checked.GUARDED


def test_a_jitted_function_is_traced_again_when_the_mode_changes():
    """A caller's ``jax.jit`` of a public function, traced inside ``checkify`` in checked
    mode, is not reused by a plain ``jit`` of the same function afterwards (that trace
    leaves its checks to the outer checkify), nor by the same call with the mode off."""
    from jaxlab.core import metrics

    scores, labels = jnp.array([-jnp.inf, 0.0, 1.0, 2.5]), jnp.array([0, 0, 1, 1])
    with checks(True):
        assert float(checked.checkify(jax.jit(metrics.auroc))(scores, labels)) == 1.0
    assert float(jax.jit(metrics.auroc)(scores, labels)) == 1.0
    with checks(True):
        assert float(jax.jit(metrics.auroc)(scores, labels)) == 1.0
        with pytest.raises(CheckError, match="`labels`"):
            checked.checkify(jax.jit(metrics.auroc))(scores, jnp.array([0, 2, 1, 1]))


def test_checkify_takes_numpy_arguments_under_vmap():
    """NumPy arguments reach the checked body as arrays (jax 0.12's checkify would keep a
    NumPy argument as a constant inside softmax's custom_jvp and fail an assertion)."""
    lw = np.array([[0.0, 1.0], [0.0, np.nan]], np.float32)
    with checks(True), pytest.raises(CheckError, match="`log_weights`"):
        checked.checkify(jax.vmap(smc.ess))(lw)
    with checks(True):
        np.testing.assert_allclose(checked.checkify(jax.vmap(smc.ess))(lw[:1]),
                                   jax.vmap(smc.ess)(jnp.asarray(lw[:1])), rtol=1e-6)
