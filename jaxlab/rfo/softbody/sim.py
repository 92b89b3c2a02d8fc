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
cost; values only when concrete): ``cfg.dt`` at most ``stable_dt(body, cfg)`` (static: also
while tracing); ``cfg`` a ``SimConfig`` with ``dt``,
``contact_sharpness``, ``friction_eps`` > 0, a positive integer ``substeps`` and
non-negative, finite damping, contact and friction constants; ``state`` a ``SoftState`` of
one environment (x, v [N, 3], floating; when concrete: finite, no node moving farther than
the smallest tet height in one substep, and a RuntimeWarning for inverted tets);
``activation`` [G], finite and in [-1, 1] when concrete. Inside compiled code ``health``
flags a non-finite state and inverted tets per environment (two reductions, no host
callback); ``jaxlab.rfo.envs.step`` acts on them.

Conservation (the checks in ``tests/rfo/test_softbody.py``): without damping and contact
the scheme is symplectic, so the total energy (``total_energy``) oscillates within
O(dt) of its start without drift; the internal forces sum to zero and exert no torque,
so linear momentum (without gravity) and angular momentum are conserved to round-off.
"""

import math
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import validation
from jaxlab.core.types import Array
from jaxlab.rfo.softbody import _checks, fem

__all__ = ["SimConfig", "SoftState", "forces", "substep", "env_step", "total_energy",
           "momentum", "angular_momentum", "stable_dt", "check_dt", "health"]


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


def stable_dt(body: fem.Body, cfg: SimConfig) -> float:
    """The largest substep [s] the semi-implicit Euler scheme is estimated to be stable at.

    One mode of angular frequency omega and damping rate c (v' = v - dt (omega^2 x + c v),
    x' = x + dt v') is stable iff dt < 2 / omega (sqrt(1 + xi^2) - xi), xi = c / (2 omega)
    (the central-difference critical step with damping; Belytschko, Liu & Moran,
    "Nonlinear Finite Elements for Continua and Structures", Sec. 6.3). Estimate here:
    omega^2 = ``body.omega_max``^2 (the element-eigenvalue bound of the body linearised at
    rest with the muscles fully on, ``fem.rest_frequency_bound``) + k_c (the contact
    stiffness per unit mass, with ``cfg.contact``), c = alpha_m + beta_k
    ``body.omega_max``^2 (Rayleigh damping of that mode) + c_c (contact damping). Friction
    is implicit and adds no limit. Conservative at rest (the element bound exceeds the
    assembled system's highest frequency, and every damping term lowers the limit); a
    strongly compressed state stiffens the material, so the margin of a substep just
    below the bound is smaller there.

    Args:
      body: a ``fem.Body``.
      cfg: the ``SimConfig`` (its ``dt`` is not used).

    Returns:
      The bound as a Python float.
    """
    w2 = body.omega_max ** 2 + (cfg.contact_stiffness if cfg.contact else 0.0)
    c = cfg.alpha_m + cfg.beta_k * body.omega_max ** 2 + (cfg.contact_damping if cfg.contact
                                                            else 0.0)
    if w2 == 0.0:
        return math.inf
    w = math.sqrt(w2)
    xi = c / (2.0 * w)
    return 2.0 / w * (math.sqrt(1.0 + xi * xi) - xi)


def check_dt(body: fem.Body, cfg: SimConfig) -> None:
    """Raises ValueError naming ``cfg.dt`` when it exceeds ``stable_dt(body, cfg)`` (both are
    static: the check also runs while tracing, at no cost in compiled code)."""
    bound = stable_dt(body, cfg)
    if cfg.dt > bound:
        raise ValueError(
            f"`cfg.dt`={cfg.dt:g} s exceeds the stable substep bound {bound:.3g} s of this "
            f"body, material and config (softbody.stable_dt; the step would blow up to "
            f"NaN): use `cfg.dt` <= {bound:.3g} with more `cfg.substeps` for the same "
            f"environment step, or a softer material / coarser mesh.")


def _check_state(body: fem.Body, state: SoftState) -> None:
    """``state``: a ``SoftState`` whose x and v are [N, 3] of ``body``'s nodes; when
    concrete, finite, and (warning) no tet inverted (det F <= 0)."""
    _check_state_shapes(body, state)
    validation.check_finite("state.x", state.x)
    validation.check_finite("state.v", state.v)
    if isinstance(state.x, jax.core.Tracer):
        return
    x = np.asarray(state.x, np.float64)[body.tets]
    ds = np.swapaxes(x[:, 1:] - x[:, :1], 1, 2)
    bad = np.nonzero(np.linalg.det(ds @ body.dm_inv) <= 0)[0]
    if bad.size:
        warnings.warn(f"`state.x`: {bad.size} inverted tets (det F <= 0): "
                      f"{bad[:5].tolist()}; the stable neo-Hookean material pushes them "
                      "back, but a state built this way is usually a mistake.",
                      RuntimeWarning, stacklevel=3)


def _check_speed(body: fem.Body, cfg: SimConfig, state: SoftState) -> None:
    """A concrete ``state.v`` must not carry a node across the smallest tet height in one
    substep (|v| dt < ``body.h_min``): such a state inverts tets in the first substep."""
    if isinstance(state.v, jax.core.Tracer):
        return
    speed = float(np.sqrt(np.max(np.sum(np.asarray(state.v, np.float64) ** 2, axis=-1))))
    if speed * cfg.dt >= body.h_min:
        raise ValueError(f"`state.v`: a node moves {speed * cfg.dt:.3g} m in one substep "
                         f"(|v| = {speed:.3g} m/s, `cfg.dt` = {cfg.dt:g} s), more than the "
                         f"smallest tet height {body.h_min:.3g} m: the step cannot resolve "
                         "it.")


def health(body: fem.Body, state: SoftState) -> dict[str, Array]:
    """Health flags of one environment's state, cheap enough for every step (no host
    callback): ``"nonfinite"``, any NaN / inf in x or v; ``"inverted"``, any tet with
    det F <= 0 (the stable neo-Hookean material pushes it back; reported, not fatal).

    Returns:
      {"nonfinite": bool [], "inverted": bool []}.
    """
    _check_state_shapes(body, state)
    nonfinite = ~(jnp.all(jnp.isfinite(state.x)) & jnp.all(jnp.isfinite(state.v)))
    f = fem.deformation_gradient(body, state.x)  # det F as a triple product (no LU)
    det = jnp.sum(f[:, :, 0] * jnp.cross(f[:, :, 1], f[:, :, 2]), axis=-1)
    inverted = jnp.any(det <= 0)
    return {"nonfinite": nonfinite, "inverted": inverted}


def _check_state_shapes(body: fem.Body, state: SoftState) -> None:
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
    check_dt(body, cfg)
    _check_state(body, state)
    _check_speed(body, cfg, state)
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
    check_dt(body, cfg)
    _check_state(body, state)
    _check_speed(body, cfg, state)
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
