"""Input checks shared by the soft-body modules (static shapes and dtypes, so they work on
traced arrays; value checks only on concrete inputs: nothing is added to compiled code)."""

from jaxlab.core import validation


def check_points(name: str, body, x) -> None:
    """``x``: floating [N, 3], one row per node of ``body`` (positions or velocities)."""
    validation.check_floating(name, x)
    validation.check_shape(name, x, (body.rest.shape[0], 3))


def check_activation(body, activation) -> None:
    """``activation``: None or real [G] (one per muscle group of ``body``), finite and in
    [-1, 1] when concrete (the muscle model's range; ``sim.stable_dt`` assumes it)."""
    if activation is None:
        return
    validation.check_real("activation", activation)
    validation.check_shape("activation", activation, (body.num_groups,))
    validation.check_finite("activation", activation)
    validation.check_in_range("activation", activation, -1.0, 1.0)

