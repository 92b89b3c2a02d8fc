"""Bad-input cases for ``jaxlab.avatar.teaching``, ``wholegraph.resolve`` (ours) and
``baselines.max_weight_assignment``."""

import jax.numpy as jnp
import numpy as np

from jaxlab.avatar import baselines, teaching, wholegraph
from tests.bad_inputs.harness import Case

PLAN = jnp.full((4, 5), 0.05, jnp.float32)
FREE = jnp.ones(4, bool)
S = jnp.arange(4.0)

CASES = [
    Case("teaching.uncertainty: a 1-D plan", lambda: teaching.uncertainty(jnp.ones(4)),
         "`plan`"),
    Case("teaching.uncertainty: a negative plan", lambda: teaching.uncertainty(-PLAN), "`plan`"),
    Case("teaching.uncertain_utility_gradient: power -1",
         lambda: teaching.uncertain_utility_gradient(PLAN, -1.0), "`power`"),
    Case("teaching.uncertain_utility_gradient: power True",
         lambda: teaching.uncertain_utility_gradient(PLAN, True), "`power`"),
    Case("teaching.shift_nonnegative: no candidate",
         lambda: teaching.shift_nonnegative(S, jnp.zeros(4, bool)), "`candidates`"),
    Case("teaching.shift_nonnegative: float candidates",
         lambda: teaching.shift_nonnegative(S, jnp.ones(4)), "`candidates`"),
    Case("teaching.shift_nonnegative: 2-D s",
         lambda: teaching.shift_nonnegative(jnp.zeros((4, 1)), FREE), "`s`"),
    Case("teaching.discounted: s of another length",
         lambda: teaching.discounted(jnp.zeros(3), PLAN, FREE), "`s`"),
    Case("teaching.discounted: power nan",
         lambda: teaching.discounted(S, PLAN, FREE, float("nan")), "`power`"),
    Case("teaching.with_density: density of another length",
         lambda: teaching.with_density(S, jnp.zeros(5), FREE), "`density`"),
    Case("teaching.with_density: weight inf",
         lambda: teaching.with_density(S, S, FREE, float("inf")), "`weight`"),
    Case("teaching.diverse_top_k: num above the rows",
         lambda: teaching.diverse_top_k(S, np.zeros((4, 2)), 5, 0.1), "`num`"),
    Case("teaching.diverse_top_k: features of other rows",
         lambda: teaching.diverse_top_k(S, np.zeros((3, 2)), 2, 0.1), "`features`"),
    Case("teaching.diverse_top_k: num 0",
         lambda: teaching.diverse_top_k(S, np.zeros((4, 2)), 0, 0.1), "`num`"),
    Case("teaching.diverse_top_k: diversity -1",
         lambda: teaching.diverse_top_k(S, np.zeros((4, 2)), 2, -1.0), "`diversity`"),
    Case("wholegraph.resolve: other parameters for ours",
         lambda: wholegraph.resolve("ours", wholegraph.Teaching(power=99.0)), "`teach`"),
    Case("wholegraph.resolve: parameters for a baseline",
         lambda: wholegraph.resolve("entropy", wholegraph.Teaching()), "`teach`"),
    Case("wholegraph.resolve: a negative weight",
         lambda: wholegraph.resolve("avatar_density", wholegraph.Teaching(weight=-1.0)),
         "`teach.weight`"),
    Case("wholegraph.resolve: a tuple for teach",
         lambda: wholegraph.resolve("avatar_density", (1.0, 1.0, 0.0)), "`teach`"),
]

CASES += [
    Case("avatar.baselines.max_weight_assignment: a 1-D w",
         lambda: baselines.max_weight_assignment(jnp.ones(4)), "`w`"),
    Case("avatar.baselines.max_weight_assignment: a NaN weight",
         lambda: baselines.max_weight_assignment(jnp.full((3, 3), jnp.nan)), "`w`"),
]
