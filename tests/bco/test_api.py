"""The uniform Algorithm API of jaxlab.bco: init(key, x0), step(key, state, f)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import bco
from jaxlab.bco import ensembles, estimators, losses
from jaxlab.core.types import Algorithm
from tests.bco import api_example

D = 3


def _learners():
    dom, box = bco.ball(D), bco.box(-np.ones(D), np.ones(D))
    return {
        "gradient_variation": (bco.gradient_variation(dom, 0.1), dom),
        "agarwal2010": (bco.agarwal2010(dom, 0.1), dom),
        "ogd_sqrt_d_step": (bco.ogd_sqrt_d_step(dom, 0.1), dom),
        "one_point_box": (bco.one_point_box(box, 0.1, bco.step_rule(2.0)), box),
        "universal_ensemble": (ensembles.universal_ensemble(dom, 0.1), dom),
        "dynamic_ensemble": (ensembles.dynamic_ensemble(dom, 0.1, 50), dom),
        "dynamic_ensemble_optimistic": (
            ensembles.dynamic_ensemble(dom, 0.1, 50, optimistic=True), dom),
    }


@pytest.mark.heavy
@pytest.mark.parametrize("name", list(_learners()))
def test_run_is_a_scan_of_step_with_the_key_first(name):
    learner, dom = _learners()[name]
    assert isinstance(learner, Algorithm)
    seq = losses.drifting_quadratic(jax.random.key(0), 40, D, drift=0.1)
    params, f = losses.round_params(seq)
    key = jax.random.key(1)
    state = learner.init(key, jnp.zeros(D))
    infos = []
    for p, k in zip(params, jax.random.split(key, 40), strict=True):
        state, info = learner.step(k, state, functools.partial(f, p))
        infos.append(info)
    manual = jax.tree.map(lambda *xs: jnp.stack(xs), *infos)
    ran = bco.run(key, learner, seq, jnp.zeros(D))
    for a, b in zip(manual, ran, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)  # eager vs scanned fp32
    assert bco.Info is bco.learners.RoundInfo and isinstance(ran, bco.Info)


def test_two_point_step_queries_along_the_keys_direction():
    dom = bco.ball(D)
    learner = bco.gradient_variation(dom, 0.1)
    center = jnp.array([0.5, -0.3, 0.1])
    f = lambda x: jnp.sum((x - center) ** 2)  # noqa: E731
    x0 = jnp.array([0.2, 0.0, 0.0])
    state = learner.init(jax.random.key(0), x0)
    key = jax.random.key(5)
    new, info = learner.step(key, state, f)
    u = estimators.sphere(key, D)
    # Round 1: hint 0, so the play is x0; g is the two-point estimate along u.
    np.testing.assert_allclose(info.x, x0, atol=1e-7)
    g = D / (2 * 0.1) * (f(x0 + 0.1 * u) - f(x0 - 0.1 * u)) * u
    np.testing.assert_allclose(info.g, g, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(info.loss, 0.5 * (f(x0 + 0.1 * u) + f(x0 - 0.1 * u)), rtol=1e-6)
    np.testing.assert_allclose(new.hint, info.g)
    assert int(new.t) == 1 and isinstance(new, bco.State)
    # Another key, another direction; the same key, the same round.
    other, _ = learner.step(jax.random.key(6), state, f)
    again, _ = learner.step(key, state, f)
    assert not np.allclose(other.xhat, new.xhat)
    np.testing.assert_array_equal(again.xhat, new.xhat)


@pytest.mark.parametrize("name", list(_learners()))
def test_init_ignores_the_key_and_defaults_to_the_centre(name):
    learner, dom = _learners()[name]
    a = learner.init(jax.random.key(0))
    b = learner.init(jax.random.key(1), dom.center)
    jax.tree.map(np.testing.assert_array_equal, a, b)


@pytest.mark.heavy
def test_api_example_is_deterministic_jittable_and_vmaps():
    alg, init_args, step_args = api_example.build()
    key = jax.random.key(8)
    s = alg.init(key, *init_args)
    s1, i1 = alg.step(key, s, *step_args)
    s2, i2 = jax.jit(lambda k, st: alg.step(k, st, *step_args))(key, s)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                 (s1, i1), (s2, i2))  # eager vs jit: fp32 tier
    keys = jax.random.split(key, 4)
    states = jax.vmap(lambda k: alg.init(k, *init_args))(keys)
    batched, infos = jax.vmap(lambda k, st: alg.step(k, st, *step_args))(keys, states)
    assert batched.xhat.shape == (4, 3) and infos.loss.shape == (4,)
    one, _ = alg.step(keys[2], jax.tree.map(lambda x: x[2], states), *step_args)
    np.testing.assert_allclose(batched.xhat[2], one.xhat, rtol=1e-5, atol=1e-6)


def test_module_level_init_and_step_are_the_two_point_learner():
    dom = bco.ball(D)
    f = lambda x: jnp.sum((x - 0.3) ** 2)  # noqa: E731
    x0 = jnp.array([0.5, 0.0, -0.2])
    for optimistic, learner in [(True, bco.gradient_variation(dom, 0.1)),
                                (False, bco.agarwal2010(dom, 0.1))]:
        a = bco.init(jax.random.key(0), dom, 0.1, x0)
        b = learner.init(jax.random.key(0), x0)
        jax.tree.map(np.testing.assert_array_equal, a, b)
        for i in range(3):
            k = jax.random.key(10 + i)
            a, ia = bco.step(k, a, f, dom, 0.1, optimistic=optimistic)
            b, ib = learner.step(k, b, f)
            jax.tree.map(np.testing.assert_array_equal, (a, ia), (b, ib))


@pytest.mark.heavy
@pytest.mark.parametrize("name", ["gradient_variation", "dynamic_ensemble"])
def test_predrawn_directions_give_the_same_run(name):
    learner, _ = _learners()[name]
    seq = losses.drifting_quadratic(jax.random.key(0), 60, D, drift=0.1)
    key = jax.random.key(3)
    a = jax.jit(lambda k: bco.run(k, learner, seq, jnp.zeros(D)))(key)
    b = jax.jit(lambda k: bco.run(k, learner, seq, jnp.zeros(D), predraw=True))(key)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)  # fp32, fused differently
    other = bco.run(jax.random.key(4), learner, seq, jnp.zeros(D), predraw=True)
    assert not np.allclose(other.g, b.g)  # the key does choose the directions
