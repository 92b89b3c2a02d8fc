"""``check=False``: the active loop's compiled program has no host callback (so JAX's
persistent compilation cache can keep it) and the caller checks the concrete result;
``comparison.run_seeds`` runs that program and still warns about a failed solve. (Checked
mode, on in the test run, adds host callbacks of its own: the programs are lowered as a
user's default run lowers them.)"""

import warnings

import jax
import numpy as np
import pytest

from jaxlab import avatar
from jaxlab.avatar import comparison, tasks
from jaxlab.core import checks, protocol

CALLBACK = "python_cpu_callback"  # the custom call of jax.debug.callback / pure_callback


@pytest.fixture(scope="module")
def karate():
    return tasks.real_graph_pair("karate", seed=0)


def _lowered_text(task, check):
    keys = jax.random.split(jax.random.key(0), 2)
    run = jax.jit(jax.vmap(lambda k: avatar.run_active(
        k, task, "entropy", rounds=1, budget_frac=0.1, check=check)))
    with checks(False):
        return run.lower(keys).as_text()


def test_unchecked_traced_run_has_no_host_callback_and_checked_has_one(karate):
    assert CALLBACK not in _lowered_text(karate, check=False)
    assert CALLBACK in _lowered_text(karate, check=True)


def test_run_seeds_program_has_no_host_callback(karate):
    table = (("avatar", "official"), ("random", "abs"))
    keys = protocol.item_keys(jax.random.key(0), "test", np.arange(2))
    kwargs = comparison._run_kwargs(comparison.Settings(rounds=1, budget_frac=0.1))
    with checks(False):
        text = comparison._program(table, kwargs).lower(karate, keys, np.int32(0)).as_text()
    assert CALLBACK not in text


def test_unchecked_result_checked_after_the_call_warns_like_the_checked_run(karate):
    keys = jax.random.split(jax.random.key(0), 2)
    kw = dict(rounds=1, budget_frac=0.1, epsilon=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # unchecked: no warning from the run
        res = jax.block_until_ready(jax.jit(jax.vmap(lambda k: avatar.run_active(
            k, karate, "random", check=False, **kw)))(keys))
    assert not np.any(np.asarray(res.plan_converged))
    with pytest.warns(RuntimeWarning, match="did not converge"):
        assert not avatar.loop.check_result(res, 1e-5)
    with pytest.warns(RuntimeWarning, match="did not converge"):  # checked: a callback
        jax.block_until_ready(jax.jit(jax.vmap(lambda k: avatar.run_active(
            k, karate, "random", **kw)))(keys))


def test_run_seeds_warns_about_a_failed_solve_and_equals_the_checked_program(karate):
    table = (("random", "abs"), ("entropy", "abs"))
    keys = protocol.item_keys(jax.random.key(0), "test", np.arange(2))
    settings = comparison.Settings(rounds=1, budget_frac=0.1)
    ref = jax.jit(jax.vmap(lambda k, i: avatar.run_active_switch(
        k, karate, table, i, **dict(comparison._run_kwargs(settings))), in_axes=(0, None)))
    for i in range(len(table)):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # these solves converge
            got = comparison.run_seeds(keys, karate, table, i, settings)
        want = ref(keys, np.int32(i))
        np.testing.assert_array_equal(np.asarray(got.queried), np.asarray(want.queried))
        np.testing.assert_array_equal(np.asarray(got.metrics["mrr"]),
                                      np.asarray(want.metrics["mrr"]))
    with pytest.warns(RuntimeWarning, match="did not converge.*`epsilon`=1e-05"):
        bad = comparison.run_seeds(keys, karate, table, 0, settings._replace(epsilon=1e-5))
    assert not np.any(np.asarray(bad.plan_converged))
