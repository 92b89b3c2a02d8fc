"""The soft-body simulator (``jaxlab.rfo.softbody``): one step against an independent NumPy
implementation of the same equations, finite-difference gradients through 50 steps,
energy and momentum conservation, a body at rest under gravity, mesh errors, and the
``soft_quadruped`` task's observation and reward."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import rfo
from jaxlab.rfo import envs
from jaxlab.rfo.softbody import fem, mesh, quadruped, sim

H = 0.05


def _box(cells=((0, 0, 0), (1, 0, 0)), groups=True, seed=0):
    """A small box body with two muscle groups and random fibres."""
    nodes, tets = mesh.voxel_mesh(cells, H)
    rng = np.random.default_rng(seed)
    g = np.arange(tets.shape[0]) % 3 - 1 if groups else None  # -1 (passive), 0, 1
    fib = rng.normal(size=(tets.shape[0], 3)) if groups else None
    return fem.build(nodes, tets, fem.Material(), g, fib, num_groups=2 if groups else None)


def _state(body, seed, dz=0.0, v_scale=0.1):
    rng = np.random.default_rng(seed)
    x = body.rest + 0.08 * H * rng.normal(size=body.rest.shape) + [0.0, 0.0, dz]
    v = v_scale * rng.normal(size=x.shape)
    return x, v


# ---------------------------------------------------------------- NumPy reference


def _np_forces(body, cfg, x, v, act, damping=True):
    """Forces of ``sim.forces`` by loops over tets and nodes (inverse-based cofactor,
    finite-difference Rayleigh stiffness term)."""
    mu, lam = fem.lame(fem.Material())
    alpha = 1.0 + 0.75 * mu / lam
    n = x.shape[0]
    m = np.zeros(n)
    for tet in body.tets:  # lumped mass from the rest mesh
        xr = body.rest[tet]
        vol = np.linalg.det(np.stack([xr[1] - xr[0], xr[2] - xr[0], xr[3] - xr[0]], 1)) / 6
        m[tet] += fem.Material().density * vol / 4

    def elastic(y, with_act):
        f = np.zeros((n, 3))
        for t, tet in enumerate(body.tets):
            xr, xs = body.rest[tet], y[tet]
            dm = np.stack([xr[1] - xr[0], xr[2] - xr[0], xr[3] - xr[0]], 1)
            ds = np.stack([xs[1] - xs[0], xs[2] - xs[0], xs[3] - xs[0]], 1)
            vol = np.linalg.det(dm) / 6
            F = ds @ np.linalg.inv(dm)
            J = np.linalg.det(F)
            ic = np.trace(F.T @ F)
            P = mu * (1 - 1 / (ic + 1)) * F + lam * (J - alpha) * J * np.linalg.inv(F).T
            if with_act:
                d = body.fibre[t]
                a = body.group[t] @ act
                P = P + body.sigma_max * a * np.outer(F @ d, d)
            Hm = -vol * P @ np.linalg.inv(dm).T
            for k in range(3):
                f[tet[k + 1]] += Hm[:, k]
                f[tet[0]] -= Hm[:, k]
        return f

    f = elastic(x, True)
    if damping:
        eps = 1e-7
        kv = (elastic(x + eps * v, False) - elastic(x - eps * v, False)) / (2 * eps)
        f = f + cfg.beta_k * kv - cfg.alpha_m * m[:, None] * v
    f[:, 2] -= cfg.gravity * m
    beta = cfg.contact_sharpness
    for i in range(n):
        z = x[i, 2]
        depth = np.logaddexp(0.0, -beta * z) / beta
        gate = 1.0 / (1.0 + np.exp(beta * z))
        f[i, 2] += m[i] * (cfg.contact_stiffness * depth - cfg.contact_damping * gate * v[i, 2])
    return f, m


def _np_substep(body, cfg, x, v, act):
    f, m = _np_forces(body, cfg, x, v, act)
    u = v + cfg.dt * f / m[:, None]
    beta = cfg.contact_sharpness
    for i in range(x.shape[0]):
        depth = np.logaddexp(0.0, -beta * x[i, 2]) / beta
        speed = np.sqrt(u[i, 0] ** 2 + u[i, 1] ** 2 + cfg.friction_eps ** 2)
        u[i, :2] /= 1 + cfg.dt * cfg.friction * cfg.contact_stiffness * depth / speed
    return x + cfg.dt * u, u


def test_step_matches_independent_numpy_implementation():
    """Three substeps with muscles, damping, gravity and the ground in contact (some nodes
    below z = 0, sliding) agree with the NumPy loops to 1e-9 relative."""
    body = _box()
    cfg = sim.SimConfig(substeps=3)
    x, v = _state(body, 1, dz=-0.004)
    assert (x[:, 2] < 0).any() and (x[:, 2] > 0.01).any()
    act = np.array([0.7, -0.4])
    xn, vn = x.copy(), v.copy()
    for _ in range(cfg.substeps):
        xn, vn = _np_substep(body, cfg, xn, vn, act)
    with jax.enable_x64(True):
        out = jax.jit(lambda s, a: sim.env_step(body, cfg, s, a))(
            sim.SoftState(jnp.asarray(x), jnp.asarray(v)), jnp.asarray(act))
        assert out.x.dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(out.v), vn, rtol=1e-9, atol=1e-9 * np.abs(vn).max())
    np.testing.assert_allclose(np.asarray(out.x), xn, rtol=1e-9, atol=1e-12)
    assert np.abs(vn - v).max() > 1e-3  # the step moved something


def test_forces_are_minus_the_energy_gradient():
    body = _box()
    x, _ = _state(body, 2)
    act = jnp.asarray([0.3, -0.8])
    with jax.enable_x64(True):
        xj = jnp.asarray(x)
        grad = jax.jit(jax.grad(lambda y: fem.elastic_energy(body, y, act)))(xj)
        f = jax.jit(lambda y: fem.elastic_forces(body, y, act))(xj)
    np.testing.assert_allclose(np.asarray(f), -np.asarray(grad), rtol=1e-10,
                               atol=1e-10 * np.abs(grad).max())


def test_rest_state_has_no_elastic_force_or_energy():
    body = _box()
    x = jnp.asarray(body.rest, jnp.float32)
    f, e = jax.jit(lambda y: (fem.elastic_forces(body, y), fem.elastic_energy(body, y)))(x)
    assert float(jnp.abs(f).max()) < 1e-3 and abs(float(e)) < 1e-6
    moved = jax.jit(lambda y: fem.elastic_forces(body, y))(x.at[0, 0].add(0.01))
    assert float(jnp.abs(moved).max()) > 1.0  # a 1 cm pull is felt


# ---------------------------------------------------------------- gradients


@pytest.mark.heavy
def test_gradient_through_50_steps_matches_finite_differences():
    """d/d(actions) of the final centre-of-mass x plus height through 50 environment steps
    (2 substeps each) with contact, friction, damping and muscles, along a random direction,
    against central differences in float64."""
    body = _box()
    cfg = sim.SimConfig(substeps=2)
    x, v = _state(body, 3, dz=0.001, v_scale=0.05)
    with jax.enable_x64(True):
        s0 = sim.SoftState(jnp.asarray(x), jnp.asarray(v))
        acts = 0.5 * jax.random.normal(jax.random.key(0), (50, 2), jnp.float64)
        direction = jax.random.normal(jax.random.key(1), acts.shape, jnp.float64)

        @jax.jit
        def loss(a):
            def one(s, ai):
                s = sim.env_step(body, cfg, s, ai)
                return s, None
            s = jax.lax.scan(one, s0, a)[0]
            com = quadruped.center_of_mass(body, s.x)
            return com[0] + com[2] + 0.1 * quadruped.center_of_mass(body, s.v)[0]

        analytic = float(jnp.vdot(jax.grad(loss)(acts), direction))
        eps = 1e-5
        fd = float((loss(acts + eps * direction) - loss(acts - eps * direction)) / (2 * eps))
        assert min((s0.x[:, 2]).tolist()) < 0.01  # the ground is felt
    assert abs(analytic) > 1e-6
    assert abs(analytic - fd) <= 1e-5 * abs(fd), (analytic, fd)


# ---------------------------------------------------------------- conservation


def _free_cfg(**kw):
    base = dict(dt=1e-3, alpha_m=0.0, beta_k=0.0, contact=False)
    base.update(kw)
    return sim.SimConfig(**base)


def _trajectory(body, cfg, s0, act, steps, every):
    @jax.jit
    def run(s):
        def chunk(s, _):
            s = sim.env_step(body, cfg, s, act, substeps=every)
            return s, s
        return jax.lax.scan(chunk, s, None, length=steps // every)[1]
    return run(s0)


@pytest.mark.heavy
def test_energy_is_conserved_without_damping_and_contact():
    """Symplectic Euler, muscles held on, gravity on, no damping or ground: over 1 s the
    total energy oscillates without drift, within a band that halves with dt (first order)
    and stays within 2% of the energy that moves around (kinetic + elastic at the start)
    at dt = 0.2 ms."""
    body = _box(((0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)))
    x, v = _state(body, 4, v_scale=0.3)
    act = jnp.asarray([0.5, -0.5])
    band = {}
    with jax.enable_x64(True):
        s0 = sim.SoftState(jnp.asarray(x), jnp.asarray(v))
        e0 = float(sim.total_energy(body, _free_cfg(), s0, act))
        scale = float(0.5 * jnp.sum(jnp.asarray(body.mass)[:, None] * s0.v ** 2)
                      + fem.elastic_energy(body, s0.x, act) - fem.elastic_energy(
                          body, jnp.asarray(body.rest), act))
        for dt in (4e-4, 2e-4):
            cfg = _free_cfg(dt=dt)
            n = round(1.0 / dt)
            traj = _trajectory(body, cfg, s0, act, n, n // 250)
            e = np.asarray(jax.vmap(lambda x, v, cfg=cfg: sim.total_energy(
                body, cfg, sim.SoftState(x, v), act))(traj.x, traj.v))
            kinetic = np.asarray(0.5 * jnp.sum(
                jnp.asarray(body.mass)[None, :, None] * traj.v ** 2, axis=(1, 2)))
            assert np.all(np.isfinite(e))
            assert np.ptp(kinetic) > 0.3 * scale  # energy does move between its forms
            q = len(e) // 4
            band[dt] = np.abs(e - e0).max()
            assert abs(e[-q:].mean() - e[:q].mean()) < 0.01 * scale, dt  # no drift
    assert band[2e-4] < 0.02 * scale
    assert 1.5 < band[4e-4] / band[2e-4] < 2.7, band


def test_momentum_is_conserved_without_the_ground():
    """No ground and no gravity: linear momentum stays (stiffness damping on: its forces
    sum to zero) and, without damping, angular momentum stays too, to round-off."""
    body = _box(((0, 0, 0), (1, 0, 0), (0, 1, 0)))
    x, v = _state(body, 5, v_scale=0.3)
    act = jnp.asarray([0.9, 0.2])
    with jax.enable_x64(True):
        s0 = sim.SoftState(jnp.asarray(x), jnp.asarray(v))
        p0, l0 = sim.momentum(body, s0), sim.angular_momentum(body, s0)
        damped = _trajectory(body, _free_cfg(gravity=0.0, beta_k=5e-4), s0, act, 500, 50)
        free = _trajectory(body, _free_cfg(gravity=0.0), s0, act, 500, 50)
        p = jax.vmap(lambda x, v: sim.momentum(body, sim.SoftState(x, v)))(damped.x, damped.v)
        ell = jax.vmap(lambda x, v: sim.angular_momentum(body, sim.SoftState(x, v)))(
            free.x, free.v)
        moved = float(jnp.abs(free.x[-1] - s0.x).max())
        p, p0, ell, l0 = (np.asarray(a) for a in (p, p0, ell, l0))
    assert moved > 0.02
    np.testing.assert_allclose(p, np.broadcast_to(p0, p.shape), rtol=0,
                               atol=1e-12 * np.abs(p0).max())
    np.testing.assert_allclose(ell, np.broadcast_to(l0, ell.shape), rtol=0,
                               atol=1e-10 * np.abs(l0).max())


def test_quadruped_at_rest_under_gravity_stays_put():
    """Zero action for 250 steps (5 s): the body lands (dropped from 2 mm), settles on
    its legs within 4 s, then neither moves nor sinks (float32, the task's settings)."""
    soft = quadruped.soft_quadruped()
    s = soft.init(jax.random.key(0))

    @jax.jit
    def run(s):
        def one(s, _):
            s = soft.step(s, jnp.zeros(8))
            return s, (soft.obs(s), quadruped.center_of_mass(soft.body, s.x))
        return jax.lax.scan(one, s, None, length=250)

    s, (obs, com) = run(s)
    obs, com = np.asarray(obs), np.asarray(com)
    com0 = soft.body.mass @ soft.body.rest / soft.body.mass.sum()
    assert np.all(np.isfinite(obs))
    assert np.abs(obs[200:, 1:4]).max() < 2e-3  # centre-of-mass velocity
    assert float(jnp.abs(s.v).max()) < 0.01
    assert np.abs(com[-1, :2] - com0[:2]).max() < 0.01  # landing shifts it by mm only
    assert np.abs(com[-1, :2] - com[200, :2]).max() < 2e-4  # then it stays put
    assert 0.8 * com0[2] < obs[-1, 0] < com0[2] + 0.003 and np.ptp(obs[200:, 0]) < 1e-3
    assert float(s.x[:, 2].min()) > -0.01  # feet on, not through, the ground
    np.testing.assert_allclose(obs[-1, 4:7], [1.0, 0.0, 0.0], atol=0.02)  # heading level


# ---------------------------------------------------------------- errors


def test_bad_meshes_raise_naming_the_tets():
    nodes, tets = mesh.voxel_mesh([(0, 0, 0)], H)
    fem.validate_mesh(nodes, tets)
    inverted = tets.copy()
    inverted[2, [1, 2]] = inverted[2, [2, 1]]
    with pytest.raises(ValueError, match=r"inverted tets.*\[2\]"):
        fem.build(nodes, inverted)
    flat = np.concatenate([nodes, [[0.5 * H, 0.5 * H, 0.0]]])  # coplanar with a face
    degenerate = np.concatenate([tets, [[0, 1, 2, 8]]]).astype(np.int32)
    face = [i for i in range(8) if nodes[i, 2] == 0][:3]
    degenerate[-1, :3] = face
    with pytest.raises(ValueError, match=r"degenerate tets.*\[6\]"):
        fem.validate_mesh(flat, degenerate)
    with pytest.raises(ValueError, match="repeat a node"):
        fem.validate_mesh(nodes, np.array([[0, 1, 1, 2]]))
    with pytest.raises(ValueError, match="out of range"):
        fem.validate_mesh(nodes, np.array([[0, 1, 2, 99]]))
    with pytest.raises(ValueError, match="`tets` must have shape"):
        fem.validate_mesh(nodes, tets[:, :3])
    with pytest.raises(ValueError, match="`material.poisson`"):
        fem.build(nodes, tets, fem.Material(poisson=0.5))
    with pytest.raises(ValueError, match="legs must fit"):
        mesh.quadruped((2, 2, 1), (2, 1, 1))


def test_own_physics_task_needs_both_functions():
    soft = quadruped.soft_quadruped()
    with pytest.raises(ValueError, match="both `init_state_fn` and `step_fn`"):
        envs.new_task("half", None, n_frames=1, obs_fn=soft.obs, reward_fn=soft.reward,
                      obs_dim=31, act_dim=8, init_state_fn=soft.init)
    task = rfo.make_task("soft_quadruped")
    with pytest.raises(ValueError, match="own physics"):
        envs.initial_q_qd(jax.random.key(0), task)


# ---------------------------------------------------------------- the task


@pytest.mark.heavy
def test_soft_quadruped_task_reward_and_observation_by_hand():
    """``envs.reset`` / ``envs.step`` (vmapped): reward = centre-of-mass x velocity over
    the 0.02 s step - 1e-3 ||a||^2 and the observation, both recomputed in NumPy."""
    task = rfo.make_task("soft_quadruped")
    assert "soft_quadruped" in rfo.task_names() and not task.terminates
    assert task.sys is None and (task.obs_dim, task.act_dim) == (31, 8)
    soft = quadruped.soft_quadruped()
    assert 200 <= soft.body.tets.shape[0] <= 400 and soft.body.num_groups == 8
    assert set(np.unique(soft.mesh.groups)) == set(range(-1, 8))
    states = jax.vmap(lambda k: envs.reset(k, task))(jax.random.split(jax.random.key(0), 3))
    acts = jax.random.uniform(jax.random.key(1), (3, 8), minval=-1, maxval=1)
    nxt, r = jax.jit(jax.vmap(lambda s, a: envs.step(task, s, a)))(states, acts)
    m = soft.body.mass / soft.body.mass.sum()
    x0, x1 = np.asarray(states.pipeline_state.x), np.asarray(nxt.pipeline_state.x)
    v1 = np.asarray(nxt.pipeline_state.v)
    dt = soft.cfg.dt * soft.cfg.substeps
    want = (x1[..., 0] @ m - x0[..., 0] @ m) / dt - 1e-3 * np.sum(np.asarray(acts) ** 2, -1)
    np.testing.assert_allclose(np.asarray(r), want, rtol=1e-4, atol=1e-5)
    for b in range(3):
        com, vcom = m @ x1[b], m @ v1[b]
        head = x1[b, soft.mesh.front_nodes].mean(0) - x1[b, soft.mesh.back_nodes].mean(0)
        legs = [np.concatenate([x1[b, idx].mean(0) - com, v1[b, idx].mean(0)])
                for idx in soft.mesh.leg_nodes]
        want_obs = np.concatenate([[com[2]], vcom, head / np.linalg.norm(head), *legs])
        np.testing.assert_allclose(np.asarray(nxt.obs[b]), want_obs, rtol=1e-4, atol=1e-5)
    assert np.all(np.asarray(nxt.t) == 1)
