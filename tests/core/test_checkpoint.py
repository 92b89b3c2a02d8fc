from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.lib import checkpoint, study


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
    expected = study.run_resumable(chunk, init, 5)
    with pytest.raises(KeyboardInterrupt):
        study.run_resumable(lambda c, i: chunk(c, i, fail_at=3), init, 5,
                                 checkpoint_dir=tmp_path)
    calls.clear()
    resumed = study.run_resumable(chunk, init, 5, checkpoint_dir=tmp_path)
    assert calls == [3, 4]
    np.testing.assert_array_equal(resumed.x, expected.x)
    assert int(resumed.n) == 5
    calls.clear()
    again = study.run_resumable(chunk, init, 5, checkpoint_dir=tmp_path)
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


def _corrupt(step_dir, how):
    """Damages one saved step the way a killed or full-disk write can."""
    import glob
    import os
    import shutil

    if how == "truncated_data":
        files = glob.glob(os.path.join(step_dir, "**", "d", "*"), recursive=True)
        assert files
        for f in files:
            with open(f, "r+b") as fh:
                fh.truncate(10)
    elif how == "garbage_metadata":
        with open(os.path.join(step_dir, "default", "_METADATA"), "w") as fh:
            fh.write("garbage{")
    elif how == "empty_step_dir":
        shutil.rmtree(step_dir)
        os.makedirs(step_dir)


@pytest.mark.parametrize("how", ["truncated_data", "garbage_metadata", "empty_step_dir"])
def test_corrupt_latest_step_falls_back_to_previous(tmp_path, how):
    template = State(jnp.zeros(3), jnp.int32(0))
    with checkpoint.Checkpointer(tmp_path) as ck:
        ck.save(1, State(jnp.arange(3.0), jnp.int32(1)))
        ck.save(2, State(jnp.arange(3.0) + 10, jnp.int32(2)))
    _corrupt(str(tmp_path / "2"), how)
    with checkpoint.Checkpointer(tmp_path) as ck:
        with pytest.warns(RuntimeWarning, match=rf"step 2 at {tmp_path}/2 cannot be restored"):
            step, state = ck.restore_or_init(template)
        assert step == 1 and int(state.n) == 1
        np.testing.assert_array_equal(state.x, [0.0, 1.0, 2.0])
        # The damaged step is kept aside, never read again, and the run can save step 2 anew.
        assert (tmp_path / "corrupt-2").is_dir()
        ck.save(2, State(jnp.arange(3.0) + 20, jnp.int32(2)))
        assert ck.latest_step() == 2


def test_every_step_corrupt_starts_from_template(tmp_path):
    template = State(jnp.zeros(3), jnp.int32(0))
    with checkpoint.Checkpointer(tmp_path) as ck:
        ck.save(1, State(jnp.arange(3.0), jnp.int32(1)))
        ck.save(2, State(jnp.arange(3.0), jnp.int32(2)))
    _corrupt(str(tmp_path / "1"), "truncated_data")
    _corrupt(str(tmp_path / "2"), "empty_step_dir")
    with checkpoint.Checkpointer(tmp_path) as ck, pytest.warns(RuntimeWarning):
        step, state = ck.restore_or_init(template)
    assert step == 0 and state is template


def test_run_resumable_resumes_past_a_corrupt_step(tmp_path):
    """A resumable run whose newest checkpoint is damaged redoes only the lost chunk and
    ends where an uninterrupted run ends."""
    calls = []

    def chunk(c, i):
        calls.append(i)
        return {"x": c["x"] * 2 + i}

    init = {"x": jnp.float32(1)}
    full = study.run_resumable(chunk, init, 4)
    study.run_resumable(chunk, init, 3, checkpoint_dir=tmp_path)
    _corrupt(str(tmp_path / "3"), "truncated_data")
    calls.clear()
    with pytest.warns(RuntimeWarning, match="cannot be restored"):
        out = study.run_resumable(chunk, init, 4, checkpoint_dir=tmp_path)
    assert calls == [2, 3] and float(out["x"]) == float(full["x"])


def test_checkpoint_dir_depends_on_config_and_code_version(tmp_path, monkeypatch):
    from experiments.lib import provenance

    a = checkpoint.checkpoint_dir_for(tmp_path, {"lr": 0.1})
    assert a == checkpoint.checkpoint_dir_for(tmp_path, {"lr": 0.1})
    assert a != checkpoint.checkpoint_dir_for(tmp_path, {"lr": 0.2})
    monkeypatch.setattr(provenance, "code_version", lambda: "0.1.0+src.other")
    assert a != checkpoint.checkpoint_dir_for(tmp_path, {"lr": 0.1})
