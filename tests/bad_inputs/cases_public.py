"""One or two bad calls for public functions that no other class reaches: small
constructors, schedules, estimators, helpers and data sources."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab import bco, qlearning
from jaxlab.bco import estimators, losses, msmwc
from jaxlab.core import keys, metrics, protocol
from jaxlab.dllm import decoding, model, poke, tasks
from jaxlab.gepc import data, groups, schedule, scoring
from jaxlab.gepc import model as gepc_model
from pallas_kernels.sale import reference
from tests.bad_inputs.harness import Case

KEY = jax.random.key(0)
SIZES = reference.BlockSizes(8, 8, 8)


def _avatar_evaluate(**settings):
    """``avatar.evaluate`` on a 12-node synthetic pair with no anchors yet."""
    from jaxlab import avatar

    task = avatar.tasks.synthetic_graph_pair(12, seed=0)
    state = avatar.loop.State(jnp.zeros(12, bool), jnp.ones(12, bool), jnp.ones(12, bool))
    return avatar.evaluate(state, task, **settings)[0]

CASES = [
    Case("avatar.evaluate: unknown solver", lambda: _avatar_evaluate(solver="sinkhorn"),
         "`solver`"),
    Case("bco.estimators.sphere: dim 0", lambda: estimators.sphere(KEY, 0), "`dim`"),
    Case("bco.estimators.coordinate_query: dim -1", lambda: estimators.coordinate_query(
        KEY, -1), "`dim`"),
    Case("bco.step_rule: scale 0", lambda: bco.step_rule(0.0), "`scale`"),
    Case("bco.step_rule: NaN lam", lambda: bco.step_rule(1.0, float("nan")), "`lam`"),
    Case("bco.ogd_sqrt_d_step: delta 0", lambda: bco.ogd_sqrt_d_step(bco.ball(2), 0.0),
         "`delta`"),
    Case("bco.domains.shrunk: delta past the inner radius", lambda: bco.domains.shrunk(
        bco.ball(2), 2.0), "`delta`"),
    Case("bco.losses.drifting_linear: num_rounds 0", lambda: losses.drifting_linear(
        KEY, 0, 2, 0.1), "`num_rounds`"),
    Case("bco.losses.drifting_quadratic: dim 0", lambda: losses.drifting_quadratic(
        KEY, 4, 0, 0.1), "`dim`"),
    Case("bco.losses.switching_quadratic: period 0", lambda: losses.switching_quadratic(
        KEY, 4, 2, 0), "`period`"),
    Case("bco.losses.stochastic_quadratic: sigma NaN", lambda: losses.stochastic_quadratic(
        KEY, 4, 2, float("nan")), "`sigma`"),
    Case("bco.losses.path_length: NaN point", lambda: losses.path_length(
        jnp.array([[0.0, 1.0], [jnp.nan, 0.0]])), "`points`"),
    Case("bco.msmwc.capped_rates: NaN loss", lambda: msmwc.capped_rates(
        jnp.full(2, 0.1), jnp.array([jnp.nan, 0.0]), jnp.zeros(2)), "`loss`"),
    Case("core.keys.as_key: a string", lambda: keys.as_key("seed"), "`key`"),
    Case("core.metrics.bootstrap_ci: num_resamples 1", lambda: metrics.bootstrap_ci(
        KEY, np.mean, (np.ones(4),), 1), "`num_resamples`"),
    Case("core.metrics.bootstrap_auroc: NaN score", lambda: metrics.bootstrap_auroc(
        KEY, np.array([0.1, np.nan, 0.3, 0.4]), np.array([0, 1, 0, 1]), 10), "`scores`"),
    Case("core.protocol.as_tuning: a float count", lambda: protocol.as_tuning(2.5),
         "`tuning`"),
    Case("core.protocol.as_tuning: negative count", lambda: protocol.as_tuning(-1),
         "`tuning.items`"),
    Case("core.protocol.item_keys: unknown split", lambda: protocol.item_keys(
        KEY, "train", np.arange(2)), "`split`"),
    Case("dllm.coarse_block: gen_length 0", lambda: decoding.coarse_block(0), "`gen_length`"),
    Case("dllm.semi_ar_block: gen_length -3", lambda: decoding.semi_ar_block(-3),
         "`gen_length`"),
    Case("dllm.log_probs: mask_id outside the vocabulary", lambda: decoding.log_probs(
        jnp.zeros((1, 2, 4)), 7), "`mask_id`"),
    Case("dllm.policy_scores: unknown policy", lambda: decoding.policy_scores(
        KEY, jnp.zeros((1, 2)), jnp.zeros((1, 2), jnp.int32), "nope"), "`policy`"),
    Case("dllm.tasks.unregister_task: unknown name", lambda: tasks.unregister_task("nope"),
         "`name`"),
    Case("dllm.poke.sibling_loss: negative weight", lambda: poke.sibling_loss(
        jnp.zeros((2, 2)), jnp.zeros((2, 2)), -1.0), "`weight`"),
    Case("dllm.poke.abstract: d_model 0", lambda: poke.abstract(0), "`d_model`"),
    Case("dllm.model.rope: odd head size", lambda: model.rope(jnp.zeros((1, 4, 1, 3)), 1e4),
         "`x`"),
    Case("gepc.schedule.alpha_bar: t 1.5", lambda: schedule.alpha_bar(1.5), "`t`"),
    Case("gepc.schedule.t_from_sqrt_alpha_bar: 0", lambda: schedule.t_from_sqrt_alpha_bar(
        0.0), "`sqrt_abar`"),
    Case("gepc.groups.get: unknown element", lambda: groups.get(("nope",), (1, 4, 4, 1)),
         "`names`"),
    Case("gepc.silverman_bandwidth: one row", lambda: scoring.silverman_bandwidth(
        jnp.ones((1, 3))), "`x`"),
    Case("gepc.data.uniform_noise: num 0", lambda: data.uniform_noise(0), "`num`"),
    Case("gepc.model.timestep_embedding: odd dim", lambda: gepc_model.timestep_embedding(
        jnp.zeros(2), 3), "`dim`"),
    Case("qlearning.schedules.stack: empty", lambda: qlearning.schedules.stack([]),
         "`schedules`"),
    Case("sale.padded_length: n 0", lambda: reference.padded_length(0, SIZES), "`n`"),
]

CASES = [c._replace(name=f"public/{c.name}") for c in CASES]
