"""POKE value head: rollout targets and a held-out fit better than a constant."""

import jax
import numpy as np
import pytest

from jaxlab.dllm import decoding, path_smc, poke, tasks
from tests.dllm.denoisers import sharpened_denoiser


@pytest.fixture(scope="module")
def setup():
    task = tasks.Addition(n_digits=3)
    return task, sharpened_denoiser(task, d_model=32, n_layers=2, mlp_hidden=48)


@pytest.mark.heavy
def test_rollout_targets_are_remaining_path_ll(setup):
    task, den = setup
    prompt, _ = task.sample(jax.random.key(0), 16)
    a = task.answer_len
    ro = poke.collect_rollouts(jax.random.key(1), den, prompt, a, mask_id=task.mask_id)
    assert ro.hidden.shape == (16 * a, a, 32)
    dec = decoding.decode(jax.random.key(1), den, prompt, a, mask_id=task.mask_id,
                          vocab_size=task.vocab_size, temperature=1.0)
    rem = np.asarray(ro.remaining).reshape(16, a)
    np.testing.assert_allclose(rem[:, 0], np.asarray(dec.path_ll), rtol=1e-5)
    assert np.all(np.diff(rem, axis=1) >= -1e-6)  # remaining LL only shrinks in magnitude
    masked = np.asarray(ro.masked).reshape(16, a, a).sum(-1)
    np.testing.assert_array_equal(masked, np.tile(np.arange(a, 0, -1), (16, 1)))


def test_rollouts_follow_the_path_proposal_and_its_blocks(setup):
    """Rollouts of the path proposal: at zero temperatures they are greedy's decode (same
    Path LL and order, semi-AR blocks respected); at a position temperature they draw
    other orders with argmax tokens."""
    task, den = setup
    prompt, _ = task.sample(jax.random.key(0), 16)
    a = task.answer_len
    blk = decoding.coarse_block(a)
    kw = dict(mask_id=task.mask_id, proposal="path", temperature=0.0, block_length=blk)
    ro = poke.collect_rollouts(jax.random.key(1), den, prompt, a, position_temperature=0.0,
                               **kw)
    greedy = decoding.decode(jax.random.key(0), den, prompt, a, mask_id=task.mask_id,
                             vocab_size=task.vocab_size, block_length=blk)
    rem = np.asarray(ro.remaining).reshape(16, a)
    np.testing.assert_allclose(rem[:, 0], np.asarray(greedy.path_ll), rtol=1e-5)
    # Position t's masked set: the block structure shows in which positions are masked.
    masked = np.asarray(ro.masked).reshape(16, a, a)
    first_block_done = masked[:, blk, :blk]  # before step blk the first block is complete
    assert not first_block_done.any()
    drawn = poke.collect_rollouts(jax.random.key(1), den, prompt, a, position_temperature=2.0,
                                  **kw)
    orders = np.asarray(drawn.masked).reshape(16, a, a)
    assert not np.array_equal(orders, masked)  # other unmasking orders were drawn
    assert not orders[:, blk, :blk].any()  # still inside the blocks
    with pytest.raises(ValueError, match="`proposal`"):
        poke.collect_rollouts(jax.random.key(1), den, prompt, a, mask_id=task.mask_id,
                              proposal="order")


@pytest.mark.heavy
def test_head_fits_held_out_rollouts_and_drives_smc(setup):
    task, den = setup
    a = task.answer_len
    tr = poke.collect_rollouts(jax.random.key(3), den, task.sample(jax.random.key(2), 512)[0],
                               a, mask_id=task.mask_id)
    te = poke.collect_rollouts(jax.random.key(5), den, task.sample(jax.random.key(4), 128)[0],
                               a, mask_id=task.mask_id)
    graphdef, params, losses, val = poke.fit(tr, hidden=16, steps=200, num_chunks=4,
                                             batch_size=128, lr=3e-3)
    assert losses[-1] < losses[0] and val.shape == (4,)
    fit = poke.evaluate(graphdef, params, te)
    # Explains a real share of the variance of single-rollout targets (a constant: 0).
    assert fit["r2"] > 0.1 and fit["mse"] < fit["baseline_mse_mean_only"]
    value_fn = poke.make_value_fn(graphdef, params, task.prompt_len, task.mask_id)
    prompt = task.sample(jax.random.key(6), 4)[0]
    res, info = path_smc.smc_decode(jax.random.key(7), den, prompt, a, mask_id=task.mask_id,
                                    vocab_size=task.vocab_size, num_particles=3, value_fn=value_fn)
    assert np.all(np.asarray(res.answer) != task.mask_id)
    assert np.all(np.isfinite(np.asarray(info.ess)))


def test_fit_rejects_bad_arguments(setup):
    task, den = setup
    ro = poke.collect_rollouts(jax.random.key(1), den, task.sample(jax.random.key(0), 8)[0],
                               task.answer_len, mask_id=task.mask_id)
    with pytest.raises(ValueError, match="num_chunks"):
        poke.fit(ro, steps=10, num_chunks=3)
    with pytest.raises(ValueError, match="val_fraction"):
        poke.fit(ro, steps=10, num_chunks=2, val_fraction=1.0)


def test_sibling_loss_against_numpy():
    rng = np.random.default_rng(0)
    pred, y = rng.normal(size=(5, 4)), rng.normal(size=(5, 4)) + 3.0
    within = (pred - pred.mean(1, keepdims=True)) - (y - y.mean(1, keepdims=True))
    want = np.mean((pred - y) ** 2) + 2.5 * np.mean(within ** 2)
    np.testing.assert_allclose(poke.sibling_loss(pred, y, 2.5), want, rtol=1e-6)
    np.testing.assert_allclose(poke.sibling_loss(pred, y, 0.0), np.mean((pred - y) ** 2),
                               rtol=1e-6)
    # a per-group shift of the prediction costs nothing in the within-group term
    np.testing.assert_allclose(poke.sibling_loss(y + 7.0 * np.arange(5)[:, None], y, 1.0)
                               - poke.sibling_loss(y + 7.0 * np.arange(5)[:, None], y, 0.0),
                               0.0, atol=1e-5)


@pytest.mark.heavy
def test_sibling_rollouts_group_prompts_and_the_sibling_fit_runs(setup):
    """Siblings share their prompt (identical all-masked first step), differ later, and a
    sibling-weighted fit trains on (group, step) rows; bad layouts raise."""
    task, den = setup
    a, k = task.answer_len, 4
    ro = poke.collect_sibling_rollouts(jax.random.key(9), den,
                                       task.sample(jax.random.key(8), 40)[0], a, siblings=k,
                                       mask_id=task.mask_id)
    h = np.asarray(ro.hidden).reshape(40, k, a, a, -1)
    np.testing.assert_allclose(h[:, :, 0], np.broadcast_to(h[:, :1, 0], h[:, :, 0].shape),
                               atol=1e-5)  # step 0: same prompt, nothing committed yet
    rem = np.asarray(ro.remaining).reshape(40, k, a)
    assert np.any(np.abs(rem[:, :, 0] - rem[:, :1, 0]) > 1e-4)  # sampled paths differ
    graphdef, params, losses, val = poke.fit(ro, hidden=16, steps=60, num_chunks=3,
                                             batch_size=16, siblings=k, sibling_weight=4.0)
    assert np.all(np.isfinite(losses)) and np.all(np.isfinite(val)) and val.shape == (3,)
    assert losses[-1] < losses[0]
    with pytest.raises(ValueError, match="siblings"):
        poke.fit(jax.tree.map(lambda x: x[:-a], ro), steps=2, num_chunks=1, siblings=k)
    with pytest.raises(ValueError, match="sibling_weight"):
        poke.fit(ro, steps=2, num_chunks=1, siblings=k, sibling_weight=-1.0)


def test_abstract_head_is_the_initialised_heads_shapes_without_weights():
    """``poke.abstract`` gives the graph and the leaf shapes / dtypes of ``poke.init``
    (the reference), as ShapeDtypeStructs; bad sizes raise naming the argument."""
    import jax
    import pytest

    from jaxlab.dllm import poke

    graph, params = poke.init(12, 8, seed=3)
    a_graph, a_params = poke.abstract(12, 8)
    assert a_graph == graph
    leaves, a_leaves = jax.tree.leaves(params), jax.tree.leaves(a_params)
    assert all(isinstance(x, jax.ShapeDtypeStruct) for x in a_leaves)
    assert [(x.shape, x.dtype) for x in a_leaves] == [(x.shape, x.dtype) for x in leaves]
    for bad, name in (((0, 8), "d_model"), ((12, -1), "hidden"), ((12.5, 8), "d_model")):
        with pytest.raises(ValueError, match=name):
            poke.abstract(*bad)
        with pytest.raises(ValueError, match=name):
            poke.init(*bad)
