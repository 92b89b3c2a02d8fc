from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.core import checkpoint


class State(NamedTuple):
    x: jax.Array
    n: jax.Array


def test_save_restore_namedtuple(tmp_path):
    with checkpoint.Checkpointer(tmp_path / "ck") as ck:
        assert ck.latest_step() is None
        with pytest.raises(FileNotFoundError):
            ck.restore(State(jnp.zeros(3), jnp.int32(0)))
        ck.save(5, State(jnp.arange(3.0), jnp.int32(7)))
        restored = ck.restore(State(jnp.zeros(3), jnp.int32(0)))
    assert isinstance(restored, State)
    np.testing.assert_array_equal(restored.x, [0.0, 1.0, 2.0])
    assert int(restored.n) == 7


def test_save_restore_tree_with_zero_size_leaves(tmp_path):
    """Orbax refuses empty arrays (MJX Data has some); they are refilled from the template."""
    tree = {"a": jnp.arange(4.0), "empty": jnp.zeros((0, 3)), "s": State(jnp.ones(2), jnp.int32(3))}
    with checkpoint.Checkpointer(tmp_path / "ck") as ck:
        ck.save(1, tree)
        template = jax.tree.map(jnp.zeros_like, tree)
        restored = ck.restore(template)
    np.testing.assert_array_equal(restored["a"], tree["a"])
    assert restored["empty"].shape == (0, 3)
    assert isinstance(restored["s"], State) and int(restored["s"].n) == 3


def test_run_resumable_resumes_without_redoing_work(tmp_path):
    calls = []

    @jax.jit
    def step(c):
        return State(c.x * 2.0 + 1.0, c.n + 1)

    def chunk(c, i, fail_at=None):
        if i == fail_at:
            raise KeyboardInterrupt
        calls.append(i)
        return step(c)

    init = State(jnp.ones(2), jnp.int32(0))
    expected = checkpoint.run_resumable(chunk, init, 5)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.run_resumable(lambda c, i: chunk(c, i, fail_at=3), init, 5,
                                 checkpoint_dir=tmp_path)
    calls.clear()
    resumed = checkpoint.run_resumable(chunk, init, 5, checkpoint_dir=tmp_path)
    assert calls == [3, 4]
    np.testing.assert_array_equal(resumed.x, expected.x)
    assert int(resumed.n) == 5
    calls.clear()
    again = checkpoint.run_resumable(chunk, init, 5, checkpoint_dir=tmp_path)
    assert calls == [] and int(again.n) == 5


def test_checkpoint_dir_depends_on_the_config_only():
    import ml_collections

    a = ml_collections.ConfigDict({"seed": 0, "sizes": [1, 2]})
    b = ml_collections.ConfigDict({"sizes": [1, 2], "seed": 0})
    c = ml_collections.ConfigDict({"seed": 1, "sizes": [1, 2]})
    da = checkpoint.checkpoint_dir_for("/w", a)
    assert da == checkpoint.checkpoint_dir_for("/w", b)  # key order does not matter
    assert da != checkpoint.checkpoint_dir_for("/w", c)
    assert da.startswith("/w/checkpoints/")
    assert da == checkpoint.checkpoint_dir_for("/w", {"seed": 0, "sizes": [1, 2]})
