"""The study runner: units are keyed by config and code version, stored bit-exactly,
recomputed when unreadable or forced (tampering: tests/test_workdir_faults.py); chunk
checkpoints resume a unit and are removed once it is done."""

import json
import os

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from experiments.lib import provenance, study


def _config(**kw):
    return ml_collections.ConfigDict({"n": 3, "seed": 0, **kw})


def _counting_unit(name, calls, spec=None, value=None):
    def run(ctx):
        calls.append(name)
        return value if value is not None else {"x": np.arange(3, dtype=np.float32) / 3}

    return study.Unit(name, run, spec)


def test_result_roundtrip_is_bit_exact(tmp_path):
    tree = {"a": np.float32([1 / 3, np.nan, np.inf, -0.0]), "b": [1, 2.5, "s", None, True],
            "c": {"d": jnp.arange(6, dtype=jnp.int32).reshape(2, 3), 7: np.bfloat16(1.5)
                  if hasattr(np, "bfloat16") else np.float16(1.5)},
            "e": np.zeros((0, 2), np.float64), "f": (np.uint8(3), 4)}
    path = str(tmp_path / "u.json")
    study.save_result(path, tree)
    back = study.load_result(path)
    np.testing.assert_array_equal(back["a"], tree["a"])
    assert back["a"].dtype == np.float32 and np.signbit(back["a"][3])
    assert back["b"] == [1, 2.5, "s", None, True]
    assert back["c"]["d"].dtype == np.int32 and back["c"]["d"].shape == (2, 3)
    assert 7 in back["c"] and back["e"].shape == (0, 2) and back["f"] == [3, 4]
    with pytest.raises(TypeError, match="unit results"):
        study.save_result(path, {"bad": object()})


def test_unit_results_keep_order_and_python_types(tmp_path):
    def run(ctx):
        return {"z": 1.5, "a": {"s": "text", "n": 3}, "m": jnp.arange(2), "k": [0.25, "x"]}

    out = study.run_units([study.Unit("u", run)], _config(), str(tmp_path))["u"]
    assert list(out) == ["z", "a", "m", "k"]
    assert out["z"] == 1.5 and type(out["z"]) is float
    assert out["a"] == {"s": "text", "n": 3} and type(out["a"]["n"]) is int
    assert isinstance(out["m"], np.ndarray) and out["k"] == [0.25, "x"]


def test_units_are_reused_only_under_the_same_config_and_code(tmp_path, monkeypatch):
    calls = []
    units = [_counting_unit("a", calls), _counting_unit("b", calls)]
    out1 = study.run_units(units, _config(), str(tmp_path))
    assert calls == ["a", "b"]
    out2 = study.run_units(units, _config(), str(tmp_path))
    assert calls == ["a", "b"]  # both reused
    np.testing.assert_array_equal(out1["a"]["x"], out2["a"]["x"])
    study.run_units(units, _config(n=4), str(tmp_path))
    assert calls == ["a", "b", "a", "b"]  # a changed config field: recomputed
    monkeypatch.setattr(provenance, "code_version", lambda: "0.0.0+src.changed")
    study.run_units(units, _config(n=4), str(tmp_path))
    assert calls[-2:] == ["a", "b"] and len(calls) == 6  # changed code: recomputed
    study.run_units(units, _config(n=4), str(tmp_path), force=True)
    assert len(calls) == 8


def test_a_narrow_spec_survives_unrelated_config_changes(tmp_path):
    calls = []
    unit = _counting_unit("narrow", calls, spec={"what": "only seed", "seed": 0})
    study.run_units([unit], _config(), str(tmp_path))
    study.run_units([unit], _config(n=99), str(tmp_path))
    assert calls == ["narrow"]


def test_unreadable_unit_file_is_recomputed(tmp_path):
    calls = []
    unit = _counting_unit("u", calls)
    study.run_units([unit], _config(), str(tmp_path))
    _, path = study.unit_path(str(tmp_path), unit, _config())
    with open(path, "w") as f:
        f.write("{truncated")
    with pytest.warns(RuntimeWarning, match=f"unit file {path} is not valid JSON"):
        out = study.run_units([unit], _config(), str(tmp_path))
    assert calls == ["u", "u"] and out["u"]["x"].shape == (3,)
    with open(path) as f:
        json.load(f)  # rewritten whole


def test_unit_names_must_be_unique_and_file_safe(tmp_path):
    with pytest.raises(ValueError, match="unique"):
        study.run_units([_counting_unit("a", []), _counting_unit("a", [])], _config(),
                        str(tmp_path))
    with pytest.raises(ValueError, match="unit name"):
        study.run_units([_counting_unit("a/b", [])], _config(), str(tmp_path))


def test_chunked_unit_resumes_from_its_checkpoint_and_cleans_up(tmp_path):
    """A unit that crashes after two of four chunks redoes only the last two."""
    done = []

    class Crash(Exception):
        pass

    def chunk(carry, i):
        done.append(i)
        if i == 2 and len(done) == 3:
            raise Crash
        return carry + jnp.float32(i + 1)

    def run(ctx):
        return {"total": ctx.run_chunks(chunk, jnp.float32(0), 4)}

    unit = study.Unit("chunked", run)
    with pytest.raises(Crash):
        study.run_units([unit], _config(), str(tmp_path))
    out = study.run_units([unit], _config(), str(tmp_path))
    assert done == [0, 1, 2, 2, 3]
    assert float(out["chunked"]["total"]) == 10.0
    key, _ = study.unit_path(str(tmp_path), unit, _config())
    assert not os.path.exists(tmp_path / "checkpoints" / key)  # removed once done


def test_cached_steps_survive_a_crash_and_go_with_the_unit(tmp_path):
    """A unit of separate steps (``ctx.cached``) that crashes in its third step reruns only
    that step; the values read back are the stored ones; a damaged step file is recomputed
    with a warning; the steps are removed once the unit's result is on disk."""
    runs = []

    class Crash(Exception):
        pass

    def run(ctx):
        out = []
        for i in range(3):
            def work(i=i):
                runs.append(i)
                if i == 2 and runs.count(2) == 1:
                    raise Crash
                return {"i": i, "x": np.float32([i / 3])}
            out.append(ctx.cached(f"step {i}", work))
        return {"steps": out}

    unit = study.Unit("stepped", run)
    with pytest.raises(Crash):
        study.run_units([unit], _config(), str(tmp_path))
    key, _ = study.unit_path(str(tmp_path), unit, _config())
    steps = tmp_path / "checkpoints" / key / "steps"
    assert len(os.listdir(steps)) == 2
    first = sorted(steps.iterdir())[0]
    first.write_text(first.read_text().replace('"sha256": "', '"sha256": "0'))
    with pytest.warns(RuntimeWarning, match="recomputing step"):
        out = study.run_units([unit], _config(), str(tmp_path))
    assert sorted(runs) == [0, 1, 1, 2, 2] or sorted(runs) == [0, 0, 1, 2, 2]
    assert len(runs) == 5  # the damaged step and the crashed one, nothing else
    assert [s["i"] for s in out["stepped"]["steps"]] == [0, 1, 2]
    assert out["stepped"]["steps"][1]["x"].tobytes() == np.float32([1 / 3]).tobytes()
    assert not os.path.exists(tmp_path / "checkpoints" / key)


def test_a_unit_sees_the_results_of_the_units_before_it(tmp_path):
    """``ctx.results`` holds the earlier units' results, computed or loaded, read-only."""
    seen = []

    def first(ctx):
        seen.append(dict(ctx.results))
        return {"x": np.arange(3)}

    def second(ctx):
        seen.append(dict(ctx.results))
        with pytest.raises(TypeError):
            ctx.results["first"] = None
        return {"y": ctx.results["first"]["x"] * 2}

    units = [study.Unit("first", first), study.Unit("second", second)]
    out = study.run_units(units, _config(), str(tmp_path))
    assert seen[0] == {} and list(seen[1]) == ["first"]
    np.testing.assert_array_equal(out["second"]["y"], [0, 2, 4])
    units[1] = study.Unit("second", second, spec="other")  # recomputed, "first" loaded
    study.run_units(units, _config(), str(tmp_path))
    assert len(seen) == 3 and list(seen[2]) == ["first"]
    np.testing.assert_array_equal(seen[2]["first"]["x"], [0, 1, 2])


@pytest.mark.parametrize("maps, cleared", [((40_000, 65_530), True),
                                            ((20_000, 65_530), False), (None, False)])
def test_compiled_programs_are_dropped_after_a_unit_only_near_the_map_limit(
        tmp_path, monkeypatch, maps, cleared):
    """Past ``MAP_SHARE`` of the process's memory-map limit, JAX's in-memory caches are
    cleared after a unit (a long study would otherwise exhaust the maps); below it, or where
    the maps cannot be read, compiled programs stay for the next unit."""
    monkeypatch.setattr(study, "_memory_maps", lambda: maps)
    add_one = jax.jit(lambda x: x + 1)
    sizes = []

    def first(ctx):
        add_one(jnp.arange(3.0)).block_until_ready()
        sizes.append(add_one._cache_size())
        return {"x": np.arange(3)}

    def second(ctx):
        sizes.append(add_one._cache_size())
        return {"y": np.arange(2)}

    study.run_units([study.Unit("first", first), study.Unit("second", second)], _config(),
                    str(tmp_path))
    assert sizes == [1, 0 if cleared else 1]


def test_memory_maps_are_read_from_proc_where_linux_has_it():
    maps = study._memory_maps()
    if not os.path.exists("/proc/self/maps"):
        assert maps is None
        return
    used, limit = maps
    assert 0 < used < limit


def test_train_and_evaluate_writes_summary_with_provenance(tmp_path):
    seen = {}
    exp = study.Experiment(
        name="toy", validate=lambda c: None,
        units=lambda c, w: [study.Unit("sq", lambda ctx: {"v": jnp.float32(c.n) ** 2})],
        summarize=lambda c, out: {"v": float(out["sq"]["v"])},
        plot=lambda c, s, out, w: seen.update(plotted=s["v"]),
        headline=lambda s: [("v", str(s["v"]))])
    summary = study.train_and_evaluate(exp, _config(), str(tmp_path))
    assert summary == {"v": 9.0} and seen["plotted"] == 9.0
    with open(tmp_path / "summary.json") as f:
        on_disk = json.load(f)
    assert on_disk["v"] == 9.0 and provenance.is_current(on_disk, _config())

    def bad(c):
        raise ValueError("`n` is bad")

    with pytest.raises(ValueError, match="`n`"):
        study.train_and_evaluate(exp._replace(validate=bad), _config(), str(tmp_path / "x"))
    assert not (tmp_path / "x").exists()  # nothing ran


def test_train_and_evaluate_writes_compile_timing_per_computed_unit(tmp_path):
    """timing.json: wall, compile, trace and run seconds and program counts for each unit
    computed in this run and for the summary; summary.json is unchanged by it."""
    exp = study.Experiment(
        name="toy", validate=lambda c: None,
        units=lambda c, w: [study.Unit("jit", lambda ctx: {"v": jax.jit(
            lambda x: jnp.cumsum(x * c.n))(jnp.arange(5.0))})],
        summarize=lambda c, out: {"v": float(out["jit"]["v"][-1])},
        plot=lambda *a: None, headline=lambda s: [])
    study.train_and_evaluate(exp, _config(), str(tmp_path))
    with open(tmp_path / "timing.json") as f:
        timing = json.load(f)
    assert set(timing["units"]) == {"jit", "(summary and plots)"}
    row = timing["units"]["jit"]
    assert row["compiles"] + row["cache_hits"] >= 1  # the unit's jitted program
    assert row["wall_s"] >= row["compile_s"] >= 0 and row["run_s"] >= 0
    assert row["wall_s"] >= row["trace_s"] + row["lower_s"] and row["lower_s"] >= 0
    assert row["duplicate_programs"] == {}  # one jitted program, built once
    assert timing["unit_key"] == provenance.unit_key(_config())
    summary = (tmp_path / "summary.json").read_bytes()
    study.train_and_evaluate(exp, _config(), str(tmp_path))  # the unit is loaded now
    with open(tmp_path / "timing.json") as f:
        assert set(json.load(f)["units"]) == {"(summary and plots)"}
    assert (tmp_path / "summary.json").read_bytes() == summary


def test_loops_run_chunks_is_the_plain_chunk_runner():
    from jaxlab.core import loops

    out = loops.run_chunks(lambda c, i: c + i, jnp.int32(0), 5)
    assert int(out) == 10
    with pytest.raises(ValueError, match="num_chunks"):
        loops.run_chunks(lambda c, i: c, 0, 0)
    assert jax.tree.structure(out) == jax.tree.structure(jnp.int32(0))
