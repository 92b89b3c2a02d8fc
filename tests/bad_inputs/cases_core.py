"""Bad-input cases for ``jaxlab.core.smc`` and ``jaxlab.core.metrics``."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import analysis, extras, loops, metrics, protocol, sharding, smc
from tests.bad_inputs.harness import Case

KEY = jax.random.key(0)
W = np.array([0.2, 0.3, 0.5], np.float32)


def _w(i, value):
    w = W.copy()
    w[i] = value
    return w


def _one_point(items, problem):
    return np.zeros(items.index.size)


def _mesh():
    return sharding.make_mesh((-1,), ("batch",))


def _resampler_cases():
    out = []
    for name in sorted(smc.RESAMPLERS):
        fn = smc.RESAMPLERS[name]
        out += [
            Case(f"smc.{name}: NaN weight", lambda fn=fn: fn(KEY, _w(1, np.nan), 4), "`weights`"),
            Case(f"smc.{name}: inf weight", lambda fn=fn: fn(KEY, _w(0, np.inf), 4), "`weights`"),
            Case(f"smc.{name}: negative weight", lambda fn=fn: fn(KEY, _w(2, -0.5), 4),
                 "`weights`"),
            Case(f"smc.{name}: all-zero weights", lambda fn=fn: fn(KEY, np.zeros(3), 4),
                 "`weights`"),
            Case(f"smc.{name}: empty weights", lambda fn=fn: fn(KEY, np.zeros(0), 4),
                 "`weights`"),
            Case(f"smc.{name}: 2-D weights", lambda fn=fn: fn(KEY, np.ones((2, 2)), 4),
                 "`weights`"),
            Case(f"smc.{name}: num_samples=0", lambda fn=fn: fn(KEY, W, 0), "`num_samples`"),
            Case(f"smc.{name}: num_samples=-2", lambda fn=fn: fn(KEY, W, -2), "`num_samples`"),
        ]
    return out


CASES = _resampler_cases() + [
    Case("smc.get_resampler: unknown name", lambda: smc.get_resampler("nope"), "`name`"),
    Case("smc.normalize_log_weights: NaN", lambda: smc.normalize_log_weights(
        jnp.array([0.0, jnp.nan, 1.0])), "`log_weights`"),
    Case("smc.normalize_log_weights: +inf", lambda: smc.normalize_log_weights(
        jnp.array([0.0, jnp.inf, 1.0])), "`log_weights`"),
    Case("smc.normalize_log_weights: all -inf", lambda: smc.normalize_log_weights(
        jnp.full(3, -jnp.inf)), "`log_weights`"),
    Case("smc.normalize_log_weights: empty", lambda: smc.normalize_log_weights(jnp.zeros(0)),
         "`log_weights`"),
    Case("smc.ess: NaN log weight", lambda: smc.ess(jnp.array([0.0, jnp.nan])), "`log_weights`"),
    Case("smc.ess: +inf log weight", lambda: smc.ess(jnp.array([0.0, jnp.inf])),
         "`log_weights`"),
    Case("smc.ess: all -inf", lambda: smc.ess(jnp.full(4, -jnp.inf)), "`log_weights`"),
    Case("smc.ess: 2-D", lambda: smc.ess(jnp.zeros((2, 3))), "`log_weights`"),
    # metrics.auroc
    Case("metrics.auroc: NaN score", lambda: metrics.auroc(
        np.array([0.1, np.nan, 0.3, 0.9]), np.array([0, 1, 0, 1])), "`scores`"),
    Case("metrics.auroc: NaN label", lambda: metrics.auroc(
        np.array([0.1, 0.2, 0.3, 0.9]), np.array([0.0, np.nan, 0.0, 1.0])), "`labels`"),
    Case("metrics.auroc: label 2", lambda: metrics.auroc(
        np.array([0.1, 0.2, 0.3, 0.9]), np.array([0, 2, 0, 1])), "`labels`"),
    Case("metrics.auroc: label -1", lambda: metrics.auroc(
        np.array([0.1, 0.2, 0.3, 0.9]), np.array([-1, 1, -1, 1])), "`labels`"),
    Case("metrics.auroc: one class", lambda: metrics.auroc(
        np.array([0.1, 0.2, 0.3]), np.array([1, 1, 1])), "`labels`"),
    Case("metrics.auroc: empty", lambda: metrics.auroc(np.zeros(0), np.zeros(0, bool)),
         "`labels`"),
    Case("metrics.auroc: shape mismatch", lambda: metrics.auroc(np.zeros(5), np.zeros(4)),
         "`labels`"),
    Case("metrics.auroc: 2-D scores", lambda: metrics.auroc(np.zeros((2, 2)), np.zeros((2, 2))),
         "`scores`"),
    Case("metrics.average_ranks: NaN", lambda: metrics.average_ranks(
        np.array([1.0, np.nan, 2.0])), "`x`"),
    # regret / slopes / CIs
    Case("metrics.cumulative_regret: NaN loss", lambda: metrics.cumulative_regret(
        np.array([1.0, np.nan]), np.array([0.0, 0.0])), "`losses`"),
    Case("metrics.cumulative_regret: inf comparator", lambda: metrics.cumulative_regret(
        np.array([1.0, 1.0]), np.array([0.0, np.inf])), "`comparator_losses`"),
    Case("metrics.cumulative_regret: shape mismatch", lambda: metrics.cumulative_regret(
        np.zeros(3), np.zeros(2)), "`comparator_losses`"),
    Case("metrics.loglog_slope: NaN y", lambda: metrics.loglog_slope(
        np.array([1.0, 2.0, 4.0]), np.array([1.0, np.nan, 2.0])), "`y`"),
    Case("metrics.loglog_slope: one point", lambda: metrics.loglog_slope(
        np.array([1.0]), np.array([2.0])), "`x`"),
    Case("metrics.loglog_slope: constant x", lambda: metrics.loglog_slope(
        np.array([2.0, 2.0, 2.0]), np.array([1.0, 2.0, 3.0])), "`x`"),
    Case("metrics.mean_and_ci: one replicate", lambda: metrics.mean_and_ci(np.ones((1, 3))),
         "`samples`"),
    Case("metrics.mean_and_ci: empty", lambda: metrics.mean_and_ci(np.ones((0,))),
         "`samples`"),
    Case("metrics.mean_and_ci: NaN sample", lambda: metrics.mean_and_ci(
        np.array([1.0, np.nan, 2.0])), "`samples`"),
    Case("metrics.mean_and_ci: level 1.5", lambda: metrics.mean_and_ci(np.ones(4), level=1.5),
         "`level`"),
    Case("metrics.mean_and_ci: level NaN", lambda: metrics.mean_and_ci(np.ones(4),
                                                                       level=float("nan")),
         "`level`"),
    Case("metrics.mean_and_ci: bad axis", lambda: metrics.mean_and_ci(np.ones((3, 4)), axis=2),
         "`axis`"),
    # optional dependencies
    Case("extras.extra_of: a module object", lambda: extras.extra_of(np), "`module`"),
    Case("extras.message: a required dependency", lambda: extras.message("numpy"),
         "`module`"),
    Case("extras.require: an empty name", lambda: extras.require(""), "`module`"),
    # chunked loops
    Case("loops.run_chunks: num_chunks 0", lambda: loops.run_chunks(
        lambda c, i: c, 0, 0), "`num_chunks`"),
    # the comparison protocol
    Case("protocol.compare: one test seed", lambda: protocol.compare(
        KEY, None, contenders={"a": protocol.Contender(_one_point)}, tuning=0, seeds=1,
        progress=False), "`seeds`"),
    Case("analysis.analyse: resamples 1", lambda: analysis.analyse(
        KEY, {"a": np.ones(3), "b": np.zeros(3)}, resamples=1), "`resamples`"),
    Case("protocol.tune: a grid of several points and no tuning items", lambda: protocol.tune(
        KEY, None, contenders={"a": protocol.Contender(lambda i, p, *, x: 0, ({"x": 1},
                                                                           {"x": 2}))},
        tuning=0, progress=False), "`tuning`"),
    Case("protocol.bind: a dict for the spec", lambda: protocol.bind({"name": "x"}), "`spec`"),
    Case("protocol.compare: tuning True", lambda: protocol.compare(
        KEY, None, contenders={"a": protocol.Contender(_one_point)}, tuning=True,
        progress=False), "`tuning`"),
    Case("metrics.bootstrap_indices: no rows", lambda: metrics.bootstrap_indices(KEY, 0, 10),
         "`n`"),
    Case("metrics.bootstrap_indices: no resamples", lambda: metrics.bootstrap_indices(
        KEY, 5, 0), "`num_resamples`"),
    Case("protocol.analyse: a NaN item", lambda: protocol.analyse(
        KEY, {"a": np.array([1.0, np.nan, 2.0]), "b": np.ones(3)}), "`values"),
    Case("protocol.analyse: level 95", lambda: protocol.analyse(
        KEY, {"a": np.ones(3), "b": np.zeros(3)}, level=95), "`level`"),
    Case("protocol.mean_statistic: no items", lambda: protocol.mean_statistic(
        np.zeros(0), np.zeros(0, int)), "`values`"),
    Case("protocol.paired_difference: a and b of different lengths", lambda: (
        protocol.paired_difference(KEY, np.ones(4), np.ones(3))), "`b`"),
    # sharding and multi-host helpers
    Case("sharding.initialize_distributed: num_processes 0", lambda: (
        sharding.initialize_distributed(num_processes=0)), "`num_processes`"),
    Case("sharding.initialize_distributed: process_id past num_processes", lambda: (
        sharding.initialize_distributed("localhost:1", num_processes=2, process_id=2)),
        "`process_id`"),
    Case("sharding.make_mesh: axis_names one string", lambda: sharding.make_mesh(
        (-1,), "batch"), "`axis_names`"),
    Case("sharding.make_mesh: two -1 entries", lambda: sharding.make_mesh(
        (-1, -1), ("a", "b")), "`shape`"),
    Case("sharding.place: a Mesh, not a sharding", lambda: sharding.place(
        np.zeros(2), _mesh()), "`sharding`"),
    Case("sharding.shard_batch: 2-D mesh_shape", lambda: sharding.shard_batch(
        np.zeros(2), (1, 1)), "`mesh_shape`"),
    Case("sharding.shard_leading_axis: unknown axis_name", lambda: (
        sharding.shard_leading_axis(np.zeros(2), _mesh(), "model")), "`axis_name`"),
    Case("sharding.sync: a non-string name", lambda: sharding.sync(3), "`name`"),
    Case("sharding.to_host: a PRNG key", lambda: sharding.to_host({"k": KEY}), "`tree`"),
]

CASES = [c._replace(name=f"core/{c.name}") for c in CASES]
