"""Tetrahedral finite elements: stable neo-Hookean elasticity, fibre muscles, lumped mass.

Linear tetrahedra (constant strain per element, Sifakis & Barbic, "FEM simulation of 3D
deformable solids", SIGGRAPH 2012 course notes, Sec. 4). For element ``t`` with rest nodes
X_0..X_3 and current nodes x_0..x_3:

    D_m = [X_1 - X_0, X_2 - X_0, X_3 - X_0],   D_s = [x_1 - x_0, x_2 - x_0, x_3 - x_0]
    F = D_s D_m^{-1}                                  (deformation gradient)
    V_t = det(D_m) / 6                                (rest volume, > 0 for a valid tet)
    E_t = V_t Psi(F),   H = -V_t P(F) D_m^{-T},   f_1..3 = columns of H,  f_0 = -sum

with P = dPsi/dF the first Piola-Kirchhoff stress (the course notes' Eq. 4.6 / Alg. 1).

Material: **stable neo-Hookean** (Smith, de Goes & Kim, "Stable Neo-Hookean Flesh
Simulation", ACM TOG 2018, the variant with the log barrier on I_C):

    Psi(F) = mu/2 (I_C - 3) - mu/2 log((I_C + 1) / 4) + lam/2 (J - alpha)^2,
    P(F)   = mu (1 - 1 / (I_C + 1)) F + lam (J - alpha) cof(F),
    I_C = tr(F^T F), J = det F, cof(F) = dJ/dF = [f1 x f2, f2 x f0, f0 x f1] (columns f_i
    of F), alpha = 1 + 3 mu / (4 lam) so that P(I) = 0 (rest stability).

Why neo-Hookean and not corotated linear elasticity: corotated needs the polar (or SV)
decomposition of F, whose derivative is singular where singular values repeat (the rest
state itself) and ill-defined for inverted elements, so reverse-mode gradients through it
need special care; the stable neo-Hookean energy is a polynomial of F plus a log of
I_C + 1 >= 1, smooth everywhere (inverted elements included: J < alpha pushes back), and
it is an energy, so the energy and momentum checks have an exact target.

Muscles (ours, in the scheme of the soft-body locomotion tasks of NVIDIA Warp's
``example_walker`` and the Rewarped benchmark: an action per group of tetrahedra drives
an active stress in that group): a fibre direction d (unit, rest frame) per tet and an
activation a in [-1, 1] give the active stress of a fibre model (Teran et al., SCA 2003):

    P_act = sigma_max a (F d) d^T,    Psi_act = sigma_max a / 2 (|F d|^2 - 1),

so a > 0 shortens the fibres, a < 0 lengthens them (an antagonist pair in one signed
action). For constant ``a`` this is conservative and rotation invariant: energy and both
momenta stay exact targets of the checks.

Mass: lumped, each node carries a quarter of rho V_t of every tet it belongs to.
Rayleigh damping (C = alpha_m M + beta_k K(x)) and contact are in ``sim``.

Checks: ``Material`` checks its fields on construction (finite; ``youngs``, ``density``
> 0, ``sigma_max`` >= 0, ``poisson`` in (-1, 0.5)), naming the field. ``validate_mesh``
(run by ``build``) raises ValueError for non-finite nodes, node indices out of range, a
tet that repeats a node, duplicated tets (the same node set in any order), nodes of no
tet, and degenerate (|V_t| tiny) or inverted (V_t < 0) tets, naming the first offending
tets or nodes; ``build`` also checks integer ``groups`` and finite, non-zero ``fibres``,
and stores ``rest_frequency_bound`` (for ``sim.stable_dt``) and the smallest tet height.
The functions of a body check their arguments' shapes and dtypes (positions ``x`` [N, 3]
floating, ``f`` [T, 3, 3] floating, ``activation`` [G], finite and in [-1, 1] when
concrete): static checks, so they also run under ``jit`` / ``vmap`` / ``grad``
at no cost.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import validation
from jaxlab.core.types import Array
from jaxlab.rfo.softbody import _checks

__all__ = ["Material", "Body", "check_material", "validate_mesh", "build",
           "deformation_gradient", "first_piola", "energy_density", "elastic_forces",
           "elastic_energy", "lame", "rest_frequency_bound", "tet_heights"]


class _MaterialFields(NamedTuple):
    youngs: float = 6e4
    poisson: float = 0.3
    density: float = 1000.0
    sigma_max: float = 1.5e4


# field: (low, high, low_inclusive, high_inclusive) of the physically meaningful range
_MATERIAL_RANGES = {"youngs": (0.0, np.inf, False, False),
                    "poisson": (-1.0, 0.5, False, False),
                    "density": (0.0, np.inf, False, False),
                    "sigma_max": (0.0, np.inf, True, False)}


def check_material(material) -> None:
    """Raises TypeError unless ``material`` is a ``Material``, ValueError naming the first
    field outside its range (``youngs``, ``density`` finite and > 0, ``sigma_max`` finite
    and >= 0, ``poisson`` in (-1, 0.5)); traced fields are not checked."""
    if not isinstance(material, Material):
        raise TypeError(f"`material` must be a softbody.Material, got "
                        f"{type(material).__name__}.")
    for field, (low, high, low_inc, high_inc) in _MATERIAL_RANGES.items():
        value = getattr(material, field)
        if isinstance(value, jax.core.Tracer):
            continue
        if np.ndim(value) or np.asarray(value).dtype.kind not in "iuf":
            raise TypeError(f"`material.{field}` must be a real number, got {value!r}.")
        validation.check_in_range(f"material.{field}", getattr(material, field), low, high,
                                  low_inclusive=low_inc, high_inclusive=high_inc)


class Material(_MaterialFields):
    """Material and actuation constants (SI units), checked on construction.

    Attributes:
      youngs: Young's modulus E [Pa], finite and > 0.
      poisson: Poisson ratio nu in (-1, 0.5).
      density: rho [kg / m^3], finite and > 0.
      sigma_max: peak active fibre stress [Pa] at |activation| = 1, finite and >= 0.

    Raises:
      ValueError: a concrete field outside its range, naming it (``material.density``
        ...); ``_replace`` checks the same way.
    """

    __slots__ = ()

    def __new__(cls, youngs: float = 6e4, poisson: float = 0.3, density: float = 1000.0,
                sigma_max: float = 1.5e4):
        material = super().__new__(cls, youngs, poisson, density, sigma_max)
        check_material(material)
        return material

    def _replace(self, **changes) -> "Material":
        return Material(**{**self._asdict(), **changes})


def lame(material: Material) -> tuple[float, float]:
    """(mu, lam) from Young's modulus and the Poisson ratio."""
    e, nu = material.youngs, material.poisson
    return e / (2.0 * (1.0 + nu)), e * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))


class Body(NamedTuple):
    """A meshed body with its precomputed rest quantities (NumPy, float64: arrays become
    JAX arrays of the default float type where they are used, so the same body runs in
    float32 and, under ``jax.enable_x64``, float64).

    Attributes:
      rest: [N, 3] rest node positions.
      tets: [T, 4] int32 node indices, positively oriented (det D_m > 0).
      dm_inv: [T, 3, 3] D_m^{-1}.
      volume: [T] rest volumes V_t.
      mass: [N] lumped node masses.
      fibre: [T, 3] unit fibre directions (rest frame).
      group: [T, G] one-hot muscle group of each tet (a passive tet has a zero row).
      mu, lam, alpha, sigma_max: float constants (``Material`` converted).
      omega_max: bound [rad / s] on the highest angular frequency of the body linearised at
        rest with every muscle fully on (``rest_frequency_bound``; ``sim.stable_dt``).
      h_min: the smallest tet height [m] (``tet_heights``).
    """

    rest: np.ndarray
    tets: np.ndarray
    dm_inv: np.ndarray
    volume: np.ndarray
    mass: np.ndarray
    fibre: np.ndarray
    group: np.ndarray
    mu: float
    lam: float
    alpha: float
    sigma_max: float
    omega_max: float
    h_min: float

    @property
    def num_groups(self) -> int:
        """Number of muscle groups G (the action size)."""
        return int(self.group.shape[1])


def _signed_volumes(nodes: np.ndarray, tets: np.ndarray) -> np.ndarray:
    x = nodes[tets]
    return np.einsum("ti,ti->t", x[:, 1] - x[:, 0],
                     np.cross(x[:, 2] - x[:, 0], x[:, 3] - x[:, 0])) / 6.0


def validate_mesh(nodes, tets, rel_tol: float = 1e-6) -> None:
    """Raises ValueError unless every tet has four distinct in-range nodes and a rest
    volume above ``rel_tol`` times the cube of the mesh's mean edge length, no two tets
    share their four nodes and every node belongs to a tet.

    Args:
      nodes: [N, 3] rest positions.
      tets: [T, 4] node indices (orientation: det[X1-X0, X2-X0, X3-X0] > 0).
      rel_tol: degenerate-volume threshold, relative to (mean edge)^3.

    Raises:
      ValueError: wrong shapes, non-finite nodes, indices out of range or repeated within a
        tet, duplicated tets (the same node set in any order: mass and stiffness counted
        twice), nodes of no tet (unused nodes would have zero mass, so they are refused
        rather than dropped silently), degenerate (|V| <= tol) or inverted (V < 0) tets
        (the message names the first few offending tets and their volumes), or ``rel_tol``
        negative or not finite.
    """
    validation.check_in_range("rel_tol", rel_tol, 0.0, np.inf, high_inclusive=False)
    nodes = np.asarray(nodes, np.float64)
    tets_a = np.asarray(tets)
    if nodes.ndim != 2 or nodes.shape[1] != 3 or nodes.shape[0] < 4:
        raise ValueError(f"`nodes` must have shape (N >= 4, 3), got {nodes.shape}.")
    if not np.all(np.isfinite(nodes)):
        raise ValueError("`nodes` must be finite.")
    if tets_a.ndim != 2 or tets_a.shape[1] != 4 or tets_a.shape[0] < 1:
        raise ValueError(f"`tets` must have shape (T >= 1, 4), got {tets_a.shape}.")
    if not np.issubdtype(tets_a.dtype, np.integer):
        raise ValueError(f"`tets` must hold integer node indices, got {tets_a.dtype}.")
    bad = np.nonzero(np.any((tets_a < 0) | (tets_a >= nodes.shape[0]), axis=1))[0]
    if bad.size:
        raise ValueError(f"`tets`: node index out of range [0, {nodes.shape[0]}) in tets "
                         f"{bad[:5].tolist()} (e.g. {tets_a[bad[0]].tolist()}).")
    srt = np.sort(tets_a, axis=1)
    bad = np.nonzero(np.any(srt[:, 1:] == srt[:, :-1], axis=1))[0]
    if bad.size:
        raise ValueError(f"`tets`: degenerate tets repeat a node: {bad[:5].tolist()} "
                         f"(e.g. {tets_a[bad[0]].tolist()}).")
    _, first, counts = np.unique(srt, axis=0, return_index=True, return_counts=True)
    if np.any(counts > 1):
        dup = [np.nonzero(np.all(srt == srt[i], axis=1))[0].tolist()
               for i in first[counts > 1][:5]]
        raise ValueError(f"`tets`: {int(np.sum(counts - 1))} duplicated tets (the same four "
                         f"nodes in any order; each would count its mass and stiffness "
                         f"twice): rows {dup}.")
    unused = np.setdiff1d(np.arange(nodes.shape[0]), tets_a)
    if unused.size:
        raise ValueError(f"`nodes`: {unused.size} nodes belong to no tet (they would have "
                         f"no mass): {unused[:5].tolist()}; drop them from the mesh.")
    x = nodes[tets_a]
    edges = np.concatenate([x[:, i] - x[:, j] for i in range(4) for j in range(i)])
    tol = rel_tol * np.mean(np.linalg.norm(edges, axis=-1)) ** 3
    vol = _signed_volumes(nodes, tets_a)
    bad = np.nonzero(np.abs(vol) <= tol)[0]
    if bad.size:
        raise ValueError(f"`tets`: {bad.size} degenerate tets (|volume| <= {tol:.3g}): "
                         f"{bad[:5].tolist()}, volumes {vol[bad[:5]].tolist()}.")
    bad = np.nonzero(vol < 0)[0]
    if bad.size:
        raise ValueError(f"`tets`: {bad.size} inverted tets (negative volume; swap two "
                         f"nodes to fix the orientation): {bad[:5].tolist()}, volumes "
                         f"{vol[bad[:5]].tolist()}.")


def build(nodes, tets, material: Material = Material(), groups=None, fibres=None,  # noqa: B008
          num_groups: int | None = None) -> Body:
    """Validates a mesh and precomputes its rest quantities.

    Args:
      nodes: [N, 3] rest positions [m].
      tets: [T, 4] node indices, positively oriented.
      material: a ``Material``.
      groups: [T] int muscle group per tet, -1 for passive (default: all passive).
      fibres: [T, 3] fibre directions (normalised here; default +z).
      num_groups: G (default max(groups) + 1).

    Returns:
      The ``Body``.

    Raises:
      ValueError: a bad mesh (``validate_mesh``), bad material constants, groups that are
        not integers in [-1, G) or fibres of the wrong shape, non-finite or of zero length.
    """
    validate_mesh(nodes, tets)
    nodes = np.asarray(nodes, np.float64)
    tets = np.asarray(tets, np.int32)
    t = tets.shape[0]
    check_material(material)
    if groups is not None:
        given = np.asarray(groups)
        if given.dtype.kind not in "iuf" or (given.dtype.kind == "f"
                                             and not np.all(given == np.round(given))):
            raise ValueError(f"`groups` must hold integer group ids (-1: passive), got "
                             f"{given.dtype} values such as {given.ravel()[:6].tolist()}.")
    groups = np.full(t, -1, np.int64) if groups is None else np.asarray(groups, np.int64)
    if groups.shape != (t,):
        raise ValueError(f"`groups` must have shape ({t},), got {groups.shape}.")
    g = int(groups.max() + 1) if num_groups is None else int(num_groups)
    if groups.min() < -1 or groups.max() >= max(g, 1):
        raise ValueError(f"`groups` entries must lie in [-1, {g}), got [{groups.min()}, "
                         f"{groups.max()}].")
    fibres = np.tile([0.0, 0.0, 1.0], (t, 1)) if fibres is None else np.asarray(fibres,
                                                                              np.float64)
    if fibres.shape != (t, 3):
        raise ValueError(f"`fibres` must have shape ({t}, 3), got {fibres.shape}.")
    validation.check_finite("fibres", fibres)
    length = np.linalg.norm(fibres, axis=1, keepdims=True)
    if np.any(length == 0):
        raise ValueError(f"`fibres` must be non-zero directions; tets "
                         f"{np.nonzero(length[:, 0] == 0)[0][:5].tolist()} have a zero "
                         "fibre.")
    fibres = fibres / length
    x = nodes[tets]
    dm = np.stack([x[:, 1] - x[:, 0], x[:, 2] - x[:, 0], x[:, 3] - x[:, 0]], axis=-1)
    volume = np.linalg.det(dm) / 6.0
    mass = np.zeros(nodes.shape[0])
    np.add.at(mass, tets.reshape(-1), np.repeat(material.density * volume / 4.0, 4))
    if np.any(mass <= 0):
        raise ValueError(f"`nodes` {np.nonzero(mass <= 0)[0][:5].tolist()} belong to no "
                         "tet (zero mass); drop them from the mesh.")
    onehot = np.zeros((t, g))
    active = groups >= 0
    onehot[np.nonzero(active)[0], groups[active]] = 1.0
    mu, lam = lame(material)
    dm_inv = np.linalg.inv(dm)
    omega = rest_frequency_bound(dm_inv, fibres, active, mu, lam, material.sigma_max,
                                 material.density)
    return Body(nodes, tets, dm_inv, volume, mass, fibres, onehot, float(mu), float(lam),
                float(1.0 + 0.75 * mu / lam), float(material.sigma_max), omega,
                float(tet_heights(nodes, tets).min()))


def tet_heights(nodes: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """[T] each tet's smallest height (3 V over its largest face area) [m]: the length a
    node crosses to invert it."""
    x = np.asarray(nodes, np.float64)[np.asarray(tets)]
    areas = [0.5 * np.linalg.norm(np.cross(x[:, b] - x[:, a], x[:, c] - x[:, a]), axis=-1)
             for a, b, c in ((1, 2, 3), (0, 2, 3), (0, 1, 3), (0, 1, 2))]
    volume = np.abs(_signed_volumes(np.asarray(nodes, np.float64), np.asarray(tets)))
    return 3.0 * volume / np.max(areas, axis=0)


def rest_frequency_bound(dm_inv: np.ndarray, fibres: np.ndarray, active: np.ndarray,
                         mu: float, lam: float, sigma_max: float, density: float) -> float:
    """An upper bound [rad / s] on the highest angular frequency of the lumped-mass body
    linearised at rest, every active tet's muscle fully on (activation +1: the stiffest).

    Linearised at F = I, the stable neo-Hookean energy density is the quadratic form
    Q(dF) = 3 mu / 4 (|dF|^2 + tr(dF^2)) + (lam - 5 mu / 8) tr(dF)^2 (linear elasticity
    with Lame parameters 3 mu / 4 and lam - 5 mu / 8; Smith et al. 2018, Sec. 3.4), plus
    sigma_max |dF d|^2 for a muscle at a = 1. A tet's stiffness is K_t = V_t G_t^T A G_t
    (A the 9 x 9 matrix of Q, G_t the map from its 12 node displacements to dF) and its
    share of the lumped mass rho V_t / 4 per node, so its largest frequency is
    omega_t^2 = 4 lambda_max(G_t^T A G_t) / rho (V_t cancels). The element eigenvalue
    inequality (Irons & Treharne 1971; Belytschko, Liu & Moran, "Nonlinear Finite Elements
    for Continua and Structures", Sec. 6.3) bounds the assembled system's highest
    frequency by max_t omega_t: the value returned.

    Args:
      dm_inv: [T, 3, 3] D_m^{-1}.
      fibres: [T, 3] unit fibre directions.
      active: [T] bool, the tet belongs to a muscle group.
      mu, lam: Lame parameters of the material (``lame``).
      sigma_max: peak active stress [Pa].
      density: rho [kg / m^3].
    """
    eye = np.eye(3)
    swap = np.einsum("ad,bc->abcd", eye, eye).reshape(9, 9)  # vec(dF^T) = swap vec(dF)
    vec_i = eye.reshape(9)
    a_pass = 0.75 * mu * (np.eye(9) + swap) + (lam - 0.625 * mu) * np.outer(vec_i, vec_i)
    # b_k: the gradient of the linear shape function of node k (dF = sum_k u_k b_k^T)
    b = np.concatenate([-dm_inv.sum(axis=1, keepdims=True), dm_inv], axis=1)  # [T, 4, 3]
    g = np.einsum("ac,tkb->tabkc", eye, b).reshape(-1, 9, 12)
    a_act = np.einsum("ac,tb,td->tabcd", eye, fibres, fibres).reshape(-1, 9, 9)
    a = a_pass[None] + sigma_max * active[:, None, None] * a_act
    k = np.einsum("tij,tik,tkl->tjl", g, a, g)
    return float(np.sqrt(4.0 * np.linalg.eigvalsh(k)[:, -1].max() / density))


def deformation_gradient(body: Body, x: Array) -> Array:
    """F [T, 3, 3] of positions x [N, 3]."""
    _checks.check_points("x", body, x)
    xt = x[body.tets]
    ds = jnp.swapaxes(xt[:, 1:] - xt[:, :1], 1, 2)  # columns x_i - x_0
    return ds @ jnp.asarray(body.dm_inv, x.dtype)


def _cofactor(f: Array) -> Array:
    c0, c1, c2 = f[..., :, 0], f[..., :, 1], f[..., :, 2]
    return jnp.stack([jnp.cross(c1, c2), jnp.cross(c2, c0), jnp.cross(c0, c1)], axis=-1)


def first_piola(body: Body, f: Array, activation: Array | None = None) -> Array:
    """P [T, 3, 3]: stable neo-Hookean plus, with ``activation`` [G], fibre active stress."""
    validation.check_floating("f", f)
    validation.check_shape("f", f, (body.tets.shape[0], 3, 3))
    _checks.check_activation(body, activation)
    ic = jnp.sum(f * f, axis=(-2, -1))
    cof = _cofactor(f)
    j = jnp.sum(f[..., :, 0] * cof[..., :, 0], axis=-1)
    p = (body.mu * (1.0 - 1.0 / (ic + 1.0)))[:, None, None] * f \
        + (body.lam * (j - body.alpha))[:, None, None] * cof
    if activation is not None:
        d = jnp.asarray(body.fibre, f.dtype)
        a = jnp.asarray(body.group, f.dtype) @ activation  # [T]
        fd = jnp.einsum("tij,tj->ti", f, d)
        p = p + (body.sigma_max * a)[:, None, None] * fd[:, :, None] * d[:, None, :]
    return p


def energy_density(body: Body, f: Array, activation: Array | None = None) -> Array:
    """Psi [T] (plus Psi_act with ``activation``), zero at rest without activation."""
    ic = jnp.sum(f * f, axis=(-2, -1))
    j = jnp.linalg.det(f)
    psi = 0.5 * body.mu * (ic - 3.0) - 0.5 * body.mu * jnp.log((ic + 1.0) / 4.0) \
        + 0.5 * body.lam * ((j - body.alpha) ** 2 - (1.0 - body.alpha) ** 2)
    if activation is not None:
        d = jnp.asarray(body.fibre, f.dtype)
        a = jnp.asarray(body.group, f.dtype) @ activation
        fd = jnp.einsum("tij,tj->ti", f, d)
        psi = psi + 0.5 * body.sigma_max * a * (jnp.sum(fd * fd, axis=-1) - 1.0)
    return psi


def elastic_energy(body: Body, x: Array, activation: Array | None = None) -> Array:
    """sum_t V_t Psi(F_t) (scalar)."""
    _checks.check_activation(body, activation)
    f = deformation_gradient(body, x)
    return jnp.sum(jnp.asarray(body.volume, x.dtype) * energy_density(body, f, activation))


def elastic_forces(body: Body, x: Array, activation: Array | None = None) -> Array:
    """Nodal forces [N, 3] = -dE/dx of the elastic (and active) energy, assembled from
    H = -V_t P D_m^{-T} per tet (module doc)."""
    f = deformation_gradient(body, x)
    p = first_piola(body, f, activation)
    h = -jnp.asarray(body.volume, x.dtype)[:, None, None] * (
        p @ jnp.swapaxes(jnp.asarray(body.dm_inv, x.dtype), 1, 2))
    cols = jnp.swapaxes(h, 1, 2)  # [T, 3 (node 1..3), 3 (xyz)]
    per_node = jnp.concatenate([-jnp.sum(cols, axis=1, keepdims=True), cols], axis=1)
    return jax.ops.segment_sum(per_node.reshape(-1, 3), body.tets.reshape(-1),
                               num_segments=body.rest.shape[0])
