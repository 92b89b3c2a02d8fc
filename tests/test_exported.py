"""The exported-program cache (experiments.lib.exported): a program exported once is
loaded on the next call and computes the same bits as plain jit; damaged artefacts, other
keys and programs jax.export cannot express fall back to tracing."""

import os
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from experiments.lib import exported
from jaxlab.core import sharding


class Carry(NamedTuple):
    state: nnx.State
    key: jax.Array
    total: jax.Array


def _model():
    return nnx.split(nnx.Linear(3, 4, rngs=nnx.Rngs(0)))


def _program(graphdef):
    """A few updates of a linear model on random data: a scan, a gradient, key splits."""

    def step(carry, _):
        key, sub = jax.random.split(carry.key)
        x = jax.random.normal(sub, (5, 3))

        def loss(state):
            return jnp.mean(jnp.sin(nnx.merge(graphdef, state)(x)) ** 2)

        value, grads = jax.value_and_grad(loss)(carry.state)
        state = jax.tree.map(lambda p, g: p - 0.1 * g, carry.state, grads)
        return Carry(state, key, carry.total + value), value

    def run(carry, scale):
        carry, values = jax.lax.scan(step, carry, None, length=4)
        return {"carry": carry, "values": values * scale}

    return run


def _bits(tree):
    return [np.asarray(jax.random.key_data(x) if jax.dtypes.issubdtype(
        x.dtype, jax.dtypes.prng_key) else x) for x in jax.tree.leaves(tree)]


def _assert_same_bits(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(_bits(a), _bits(b), strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert x.tobytes() == y.tobytes()


@pytest.fixture
def case():
    graphdef, state = _model()
    carry = Carry(state, jax.random.key(3), jnp.float32(0.0))
    return _program(graphdef), (carry, jnp.float32(2.0))


def test_exported_then_loaded_program_equals_plain_jit(tmp_path, case):
    fun, args = case
    first = exported.load_or_export(fun, *args, name="toy", key={"k": 1}, cache_dir=tmp_path)
    second = exported.load_or_export(fun, *args, name="toy", key={"k": 1}, cache_dir=tmp_path)
    off = exported.load_or_export(fun, *args, name="toy", key={"k": 1}, cache_dir=None)
    assert (first.source, second.source, off.source) == ("exported", "loaded", "traced")
    assert first.path == second.path and os.path.dirname(first.path) == str(tmp_path)
    assert os.listdir(tmp_path) == [os.path.basename(first.path)]
    expected = jax.jit(fun)(*args)
    for program in (first, second, off):
        out = program(*args)
        _assert_same_bits(out, expected)
        # the nnx state, NamedTuple and key array come back as they went in
        assert isinstance(out["carry"], Carry) and isinstance(out["carry"].state, nnx.State)
        assert jax.dtypes.issubdtype(out["carry"].key.dtype, jax.dtypes.prng_key)
    # the output feeds the next call (same structure): a chained run is the same too
    _assert_same_bits(second(second(*args)["carry"], args[1]),
                      jax.jit(fun)(expected["carry"], args[1]))


def test_digest_follows_key_shapes_and_dtypes_and_is_stable(case):
    fun, (carry, scale) = case
    leaves, tree = jax.tree.flatten((carry, scale))
    base = exported.digest("toy", {"k": 1}, leaves, tree)
    assert base == exported.digest("toy", {"k": 1}, leaves, tree)
    assert base != exported.digest("toy", {"k": 2}, leaves, tree)
    assert base != exported.digest("other", {"k": 1}, leaves, tree)
    wider = jax.tree.flatten((carry._replace(total=jnp.zeros(2)), scale))
    assert base != exported.digest("toy", {"k": 1}, *wider)
    as_f16 = jax.tree.flatten((carry, jnp.float16(2.0)))
    assert base != exported.digest("toy", {"k": 1}, *as_f16)


def test_damaged_artefact_is_traced_again_with_one_log_line(tmp_path, case, caplog):
    fun, args = case
    first = exported.load_or_export(fun, *args, name="toy", key=0, cache_dir=tmp_path)
    with open(first.path, "wb") as f:
        f.write(b"not a program")
    with caplog.at_level("INFO"):
        again = exported.load_or_export(fun, *args, name="toy", key=0, cache_dir=tmp_path)
    lines = [r.getMessage() for r in caplog.records if "exported:" in r.getMessage()]
    assert len(lines) == 1 and "unreadable" in lines[0] and first.path in lines[0]
    assert again.source == "exported"
    _assert_same_bits(again(*args), jax.jit(fun)(*args))
    assert exported.load_or_export(fun, *args, name="toy", key=0,
                                   cache_dir=tmp_path).source == "loaded"  # rewritten


def test_other_key_or_input_shape_exports_a_new_artefact(tmp_path, case):
    fun, (carry, scale) = case
    a = exported.load_or_export(fun, carry, scale, name="toy", key=0, cache_dir=tmp_path)
    b = exported.load_or_export(fun, carry, scale, name="toy", key=1, cache_dir=tmp_path)
    c = exported.load_or_export(fun, carry, jnp.float16(2.0), name="toy", key=0,
                                cache_dir=tmp_path)
    assert [p.source for p in (a, b, c)] == ["exported"] * 3
    assert len({a.path, b.path, c.path}) == 3


def test_unexportable_program_is_traced_and_warns_once(tmp_path):
    def with_callback(x):  # host callbacks cannot be serialised
        return jax.pure_callback(lambda a: np.asarray(a) * 2,
                                 jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    x = jnp.arange(3.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        programs = [exported.load_or_export(with_callback, x, name="callback_once",
                                            key=0, cache_dir=tmp_path) for _ in range(2)]
    assert [p.source for p in programs] == ["traced", "traced"]
    assert len([w for w in caught if "cannot be exported" in str(w.message)]) == 1
    np.testing.assert_array_equal(programs[0](x), 2 * x)
    assert os.listdir(tmp_path) == []


def test_sharded_inputs_keep_their_placement(tmp_path):
    x = sharding.shard_batch(jnp.arange(8.0).reshape(jax.device_count(), -1), (-1,))
    out_sharding = x.sharding
    for source in ("exported", "loaded"):
        p = exported.load_or_export(lambda a: a * 3, x, name="sharded", key=0,
                                    out_shardings=out_sharding, cache_dir=tmp_path)
        assert p.source == source
        y = p(x)
        assert y.sharding == out_sharding
        np.testing.assert_array_equal(y, np.asarray(x) * 3)


def test_bad_arguments_raise(tmp_path, case):
    fun, (carry, scale) = case
    with pytest.raises(ValueError, match="`name`"):
        exported.load_or_export(fun, carry, scale, name="a/b", key=0, cache_dir=tmp_path)
    p = exported.load_or_export(fun, carry, scale, name="toy", key=0, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="`args`"):
        p(carry, (scale, scale))


def test_cache_folder_follows_the_xla_cache(tmp_path):
    before = jax.config.jax_compilation_cache_dir
    try:  # nothing compiles in between: the setting is only read
        jax.config.update("jax_compilation_cache_dir", str(tmp_path))
        assert exported.folder() == os.path.join(str(tmp_path), "exported")
        jax.config.update("jax_compilation_cache_dir", None)
        assert exported.folder() is None
    finally:
        jax.config.update("jax_compilation_cache_dir", before)


class _RunsCode:
    """Unpickling this writes ``marker``: what a pickled artefact could do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('ran')",))


def _record_calls(monkeypatch) -> list:
    """Records every ``json.loads`` and ``jax.export.deserialize`` call from now on."""
    calls = []
    loads, deserialize = exported.json.loads, jax.export.deserialize
    monkeypatch.setattr(exported.json, "loads",
                        lambda *a, **k: calls.append("json.loads") or loads(*a, **k))
    monkeypatch.setattr(jax.export, "deserialize",
                        lambda *a, **k: calls.append("deserialize") or deserialize(*a, **k))
    return calls


def test_tampered_artefact_is_refused_before_anything_is_parsed(tmp_path, case, monkeypatch):
    fun, args = case
    first = exported.load_or_export(fun, *args, name="toy", key=0, cache_dir=tmp_path)
    raw = bytearray(open(first.path, "rb").read())
    header_at = len(exported.MAGIC) + 65 + 8
    raw[header_at + 1] ^= 0x01  # one bit of the JSON header flipped
    calls = _record_calls(monkeypatch)
    with open(first.path, "wb") as f:
        f.write(bytes(raw))
    with pytest.raises(ValueError, match="does not match its sha256"):
        exported._read(first.path)
    assert calls == []
    again = exported.load_or_export(fun, *args, name="toy", key=0, cache_dir=tmp_path)
    assert again.source == "exported" and "deserialize" not in calls
    _assert_same_bits(again(*args), jax.jit(fun)(*args))
    loaded = exported.load_or_export(fun, *args, name="toy", key=0, cache_dir=tmp_path)
    assert loaded.source == "loaded" and calls.count("deserialize") == 1  # rewritten


def test_pickled_artefact_never_runs(tmp_path, case, monkeypatch):
    import pickle

    fun, args = case
    first = exported.load_or_export(fun, *args, name="toy", key=0, cache_dir=tmp_path)
    marker = tmp_path / "ran"
    with open(first.path, "wb") as f:
        f.write(pickle.dumps({"format": 1, "blob": _RunsCode(marker)}))
    calls = _record_calls(monkeypatch)
    with pytest.raises(ValueError, match="not an exported-program artefact"):
        exported._read(first.path)
    again = exported.load_or_export(fun, *args, name="toy", key=0, cache_dir=tmp_path)
    assert again.source == "exported" and "deserialize" not in calls and not marker.exists()


def test_output_structure_beyond_the_inputs_is_found_again(tmp_path):
    """An output NamedTuple that is no input subtree: its structure is traced on load."""

    def fun(x):
        return Carry(state={"w": x}, key=jax.random.key(1), total=[x.sum(), None])

    x = jnp.arange(3.0)
    first = exported.load_or_export(fun, x, name="out", key=0, cache_dir=tmp_path)
    second = exported.load_or_export(fun, x, name="out", key=0, cache_dir=tmp_path)
    assert (first.source, second.source) == ("exported", "loaded")
    out = second(x)
    assert isinstance(out, Carry)
    _assert_same_bits(out, jax.jit(fun)(x))


def test_output_structure_from_containers_and_inputs(case):
    """A carry passed through comes back as the input subtree; containers as JSON."""
    _, (carry, scale) = case
    in_tree = jax.tree.structure((carry, scale))
    out_tree = jax.tree.structure({"carry": carry, "values": [scale, None, (scale,)]})
    desc = exported._tree_json(out_tree, in_tree)
    assert desc["children"][0] == {"in": [0]}
    assert exported._tree_from_json(desc, in_tree) == out_tree
    with pytest.raises(exported._NotDescribable):
        exported._tree_json(jax.tree.structure(Carry(1, 2, 3)), in_tree)
