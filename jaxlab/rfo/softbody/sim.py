"""Time stepping of a ``fem.Body``: gravity, Rayleigh damping, penalty ground contact with
smoothed Coulomb friction, semi-implicit Euler substeps in a ``lax.scan``.

Forces on node i (mass m_i, position x_i, velocity v_i; the ground is the plane z = 0):

    f_i = f_elastic(x; a)_i                      (``fem.elastic_forces``: neo-Hookean + muscles)
        - alpha_m m_i v_i + beta_k [dF_el/dx v]_i (Rayleigh damping, C = alpha_m M + beta_k K(x),
                                                   K = -dF_el/dx the tangent stiffness of the
                                                   passive material, applied as a ``jax.jvp``)
        - m_i g e_z                              (gravity)
        + n_i e_z                                (contact normal, ``contact=True``)

    s_i = softplus(-beta z_i) / beta             (smoothed penetration depth [m])
    n_i = m_i (k_c s_i - c_c sigmoid(-beta z_i) v_iz)

(penalty contact with stiffness and damping per unit mass, so every node has the same
contact frequency sqrt(k_c); the smoothed depth s is positive above the ground, so a
foot feels the ground, and its gradient, before touch-down).

Semi-implicit (symplectic) Euler per substep of length dt (the velocity first, then the
position with the new velocity), with smoothed Coulomb friction applied to the
tangential velocity implicitly:

    u   = v + dt f(x, v; a) / m                           (predicted velocity)
    v'_t = u_t / (1 + dt mu_f k_c s / sqrt(|u_t|^2 + eps_v^2)),   v'_z = u_z
    x'  = x + dt v'

i.e. the friction force -mu_f m k_c s v_t / sqrt(|v_t|^2 + eps_v^2) (Coulomb's mu_f
|normal| with the sign smoothed at the velocity scale eps_v) with its coefficient taken at
u and the velocity at the end of the substep. Ours: an explicit update of this force is
unstable in the stick regime (its damping rate mu_f k_c s / eps_v is ~100x 1 / dt for a
loaded foot); the implicit form is stable at any rate, smooth, and tends to the explicit
one when dt -> 0.

An environment step holds ``substeps`` substeps with the action held fixed, as a
``lax.scan`` whose body is wrapped in ``jax.checkpoint``: reverse mode stores only the
(x, v) carry of each substep and recomputes the forces, so memory grows with the number
of substeps times the state size and not with the force computation's intermediates.
Everything is a pure function of (x, v, action): ``vmap`` batches environments.

Checks (static shapes and types, so they also run under ``jit`` / ``vmap`` / ``grad`` at no
cost; values only when concrete): ``cfg`` a ``SimConfig`` with ``dt``,
``contact_sharpness``, ``friction_eps`` > 0, a positive integer ``substeps`` and
non-negative, finite damping, contact and friction constants; ``state`` a ``SoftState`` of
one environment (x, v [N, 3], floating); ``activation`` [G], finite when concrete.

Conservation (the checks in ``tests/rfo/test_softbody.py``): without damping and contact
the scheme is symplectic, so the total energy (``total_energy``) oscillates within
O(dt) of its start without drift; the internal forces sum to zero and exert no torque,
so linear momentum (without gravity) and angular momentum are conserved to round-off.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxlab.core import validation
from jaxlab.core.types import Array
from jaxlab.rfo.softbody import _checks, fem

__all__ = ["SimConfig", "SoftState", "forces", "substep", "env_step", "total_energy",
           "momentum", "angular_momentum"]


class SimConfig(NamedTuple):
    """Integration, damping and contact constants (hashable: a static argument).

    Attributes:
      dt: substep length [s].
      substeps: substeps per environment step (the frame skip; the action is held).
      gravity: g [m / s^2] along -z (0 disables it).
      alpha_m: Rayleigh mass-proportional damping [1 / s].
      beta_k: Rayleigh stiffness-proportional damping [s].
      contact: whether the ground z = 0 exists.
      contact_stiffness: k_c per unit mass [1 / s^2].
      contact_damping: c_c per unit mass [1 / s].
      contact_sharpness: beta [1 / m] of the smoothed depth (1 / beta: smoothing length).
      friction: Coulomb coefficient mu_f.
      friction_eps: velocity scale eps_v [m / s] of the smoothed sign.
    """

    dt: float = 2e-3
    substeps: int = 10
    gravity: float = 9.81
    alpha_m: float = 2.0
    beta_k: float = 5e-4
    contact: bool = True
    contact_stiffness: float = 1e5
    contact_damping: float = 200.0
    contact_sharpness: float = 1000.0
    friction: float = 0.8
    friction_eps: float = 1e-2


_CONFIG_RULES = {
    "dt": validation.POSITIVE, "substeps": validation.POSITIVE_INT,
    "alpha_m": validation.NON_NEGATIVE, "beta_k": validation.NON_NEGATIVE,
    "contact_stiffness": validation.NON_NEGATIVE, "contact_damping": validation.NON_NEGATIVE,
    "contact_sharpness": validation.POSITIVE, "friction": validation.NON_NEGATIVE,
    "friction_eps": validation.POSITIVE}


def _check_config(cfg: SimConfig) -> None:
    """Raises TypeError unless ``cfg`` is a ``SimConfig``, ValueError naming the first field
    out of range (``dt``, ``contact_sharpness``, ``friction_eps`` > 0, ``substeps`` a
    positive integer, the damping, contact and friction constants >= 0, all finite)."""
    if not isinstance(cfg, SimConfig):
        raise TypeError(f"`cfg` must be a softbody.SimConfig, got {type(cfg).__name__}.")
    validation.check_fields(cfg, _CONFIG_RULES, prefix="cfg")
    for name in SimConfig._fields:
        if name not in ("substeps", "contact"):
            validation.check_finite(f"cfg.{name}", getattr(cfg, name))


class SoftState(NamedTuple):
    """Node positions x [N, 3] and velocities v [N, 3] (leading axes when batched)."""

    x: Array
    v: Array


def _check_state(body: fem.Body, state: SoftState) -> None:
    """``state``: a ``SoftState`` whose x and v are [N, 3] of ``body``'s nodes."""
    if not isinstance(state, SoftState):
        raise TypeError(f"`state` must be a softbody.SoftState(x, v), got "
                        f"{type(state).__name__}.")
    _checks.check_points("state.x", body, state.x)
    _checks.check_points("state.v", body, state.v)


def _depth(cfg: SimConfig, z: Array) -> Array:
    return jax.nn.softplus(-cfg.contact_sharpness * z) / cfg.contact_sharpness


def _normal(cfg: SimConfig, m: Array, x: Array, v: Array) -> Array:
    """Normal contact force n [N] (module doc)."""
    gate = jax.nn.sigmoid(-cfg.contact_sharpness * x[:, 2])
    return m * (cfg.contact_stiffness * _depth(cfg, x[:, 2])
                - cfg.contact_damping * gate * v[:, 2])


def _friction(cfg: SimConfig, x: Array, u: Array) -> Array:
    """The velocity after implicit smoothed Coulomb friction (module doc)."""
    ut = u[:, :2]
    speed = jnp.sqrt(jnp.sum(ut * ut, axis=-1) + cfg.friction_eps ** 2)
    rate = cfg.dt * cfg.friction * cfg.contact_stiffness * _depth(cfg, x[:, 2]) / speed
    return jnp.concatenate([ut / (1.0 + rate)[:, None], u[:, 2:]], axis=-1)


def forces(body: fem.Body, cfg: SimConfig, x: Array, v: Array, activation: Array) -> Array:
    """Nodal force [N, 3] (module doc; friction is applied in ``substep``) at positions
    x, velocities v [N, 3] and muscle activations [G]."""
    _check_config(cfg)
    _checks.check_points("x", body, x)
    _checks.check_points("v", body, v)
    _checks.check_activation(body, activation)
    m = jnp.asarray(body.mass, x.dtype)
    f = fem.elastic_forces(body, x, activation)
    if cfg.beta_k:
        _, dfv = jax.jvp(lambda y: fem.elastic_forces(body, y), (x,), (v,))
        f = f + cfg.beta_k * dfv
    if cfg.alpha_m:
        f = f - cfg.alpha_m * m[:, None] * v
    if cfg.gravity:
        f = f.at[:, 2].add(-cfg.gravity * m)
    if cfg.contact:
        f = f.at[:, 2].add(_normal(cfg, m, x, v))
    return f


def substep(body: fem.Body, cfg: SimConfig, state: SoftState, activation: Array) -> SoftState:
    """One semi-implicit Euler substep."""
    _check_config(cfg)
    _check_state(body, state)
    _checks.check_activation(body, activation)
    m = jnp.asarray(body.mass, state.x.dtype)
    v = state.v + cfg.dt * forces(body, cfg, state.x, state.v, activation) / m[:, None]
    if cfg.contact and cfg.friction:
        v = _friction(cfg, state.x, v)
    return SoftState(state.x + cfg.dt * v, v)


def env_step(body: fem.Body, cfg: SimConfig, state: SoftState, activation: Array,
             substeps: int | None = None) -> SoftState:
    """``substeps`` (default ``cfg.substeps``) substeps with ``activation`` [G] held,
    each under ``jax.checkpoint``."""
    _check_config(cfg)
    _check_state(body, state)
    _checks.check_activation(body, activation)
    n = cfg.substeps if substeps is None else substeps
    validation.check_positive_int("substeps", n)

    @jax.checkpoint
    def body_fn(s, _):
        return substep(body, cfg, s, activation), None

    return jax.lax.scan(body_fn, state, None, length=n)[0]


def total_energy(body: fem.Body, cfg: SimConfig, state: SoftState,
                 activation: Array | None = None) -> Array:
    """Kinetic + elastic (+ active, for a held ``activation``) + gravitational energy;
    conserved by the continuous dynamics without damping and contact."""
    _check_config(cfg)
    _check_state(body, state)
    m = jnp.asarray(body.mass, state.x.dtype)
    kinetic = 0.5 * jnp.sum(m[:, None] * state.v ** 2)
    return kinetic + fem.elastic_energy(body, state.x, activation) \
        + cfg.gravity * jnp.sum(m * state.x[:, 2])


def momentum(body: fem.Body, state: SoftState) -> Array:
    """Linear momentum sum_i m_i v_i [3] (one environment: ``vmap`` it over a batch)."""
    _check_state(body, state)
    return jnp.sum(jnp.asarray(body.mass, state.v.dtype)[:, None] * state.v, axis=0)


def angular_momentum(body: fem.Body, state: SoftState) -> Array:
    """Angular momentum about the origin sum_i m_i x_i x v_i [3] (one environment)."""
    _check_state(body, state)
    m = jnp.asarray(body.mass, state.v.dtype)[:, None]
    return jnp.sum(m * jnp.cross(state.x, state.v), axis=0)
