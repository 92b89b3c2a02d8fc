"""The soft body checks itself: material and mesh checks, the stable substep bound
(``sim.stable_dt``) against the element Hessians and against blow-ups, the health flags and
how ``envs.step`` turns a failed soft step into an ended episode."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.rfo import envs
from jaxlab.rfo.softbody import fem, mesh, quadruped, sim

H = 0.05


@pytest.mark.parametrize("field, value", [("density", np.inf), ("youngs", np.inf),
                                          ("sigma_max", np.nan), ("poisson", 0.5),
                                          ("youngs", 0.0), ("sigma_max", -1.0)])
def test_material_refuses_a_bad_field_naming_it(field, value):
    with pytest.raises(ValueError, match=f"`material.{field}`"):
        fem.Material(**{field: value})
    with pytest.raises(ValueError, match=f"`material.{field}`"):
        fem.Material()._replace(**{field: value})


def test_duplicated_tets_are_refused_instead_of_doubling_the_mass():
    nodes, tets = mesh.voxel_mesh([(0, 0, 0)], 0.1)
    one = np.concatenate([tets[:1], tets[:1, [1, 0, 3, 2]]])  # same nodes, other order
    with pytest.raises(ValueError, match=r"`tets`: 1 duplicated tets.*\[\[0, 1\]\]"):
        fem.build(nodes, one)
    with pytest.raises(ValueError, match="`tets`: 6 duplicated tets"):
        fem.build(nodes, np.concatenate([tets, tets]))
    body = fem.build(nodes, tets)  # the cube itself: 1 kg at 1000 kg/m^3
    np.testing.assert_allclose(body.mass.sum(), 1000.0 * 0.1 ** 3, rtol=1e-12)


def test_unused_nodes_are_refused_naming_them():
    nodes, tets = mesh.voxel_mesh([(0, 0, 0)], 0.1)
    extra = np.concatenate([nodes, [[1.0, 1.0, 1.0]]])
    with pytest.raises(ValueError, match=r"`nodes`: 1 nodes belong to no tet.*\[8\]"):
        fem.validate_mesh(extra, tets)


def _elementwise_hessian_bound(body, density):
    """max over tets of sqrt(lambda_max(Hessian of V_t Psi_t at rest, muscles at +1) /
    (rho V_t / 4)), the Hessians by ``jax.hessian`` of ``fem.elastic_energy``."""
    act = jnp.ones(body.num_groups)
    rest = jnp.asarray(body.rest)
    w2 = []
    for t in range(body.tets.shape[0]):
        one = body._replace(tets=body.tets[t:t + 1], dm_inv=body.dm_inv[t:t + 1],
                            volume=body.volume[t:t + 1], fibre=body.fibre[t:t + 1],
                            group=body.group[t:t + 1])

        def energy(y, one=one, t=t):
            return fem.elastic_energy(one, rest.at[body.tets[t]].set(y.reshape(4, 3)), act)

        hess = jax.hessian(energy)(rest[body.tets[t]].reshape(-1))
        w2.append(np.linalg.eigvalsh(np.asarray(hess))[-1] / (density * body.volume[t] / 4))
    return np.sqrt(max(w2))


def test_frequency_bound_matches_element_hessians_and_bounds_the_body():
    """``omega_max`` equals the element bound computed from ``jax.hessian`` of the energy and
    is above the highest frequency of the whole lumped-mass body at rest (an upper bound)."""
    nodes, tets = mesh.voxel_mesh([(0, 0, 0), (1, 0, 0), (0, 1, 0)], H)
    rng = np.random.default_rng(0)
    body = fem.build(nodes + 0.1 * H * rng.uniform(-1, 1, nodes.shape), tets, fem.Material(),
                     np.arange(tets.shape[0]) % 3 - 1, rng.normal(size=(tets.shape[0], 3)),
                     num_groups=2)
    with jax.enable_x64(True):
        want = _elementwise_hessian_bound(body, fem.Material().density)
        hess = jax.hessian(lambda y: fem.elastic_energy(body, y.reshape(-1, 3), jnp.ones(2)))(
            jnp.asarray(body.rest).reshape(-1))
    np.testing.assert_allclose(body.omega_max, want, rtol=1e-9)
    m = np.repeat(body.mass, 3)
    system = np.sqrt(np.linalg.eigvalsh(np.asarray(hess) / np.sqrt(np.outer(m, m)))[-1])
    assert 0.5 * body.omega_max < system <= body.omega_max


def _run(soft, steps, seed=0):
    acts = jax.random.uniform(jax.random.key(seed), (steps, soft.act_dim), minval=-1,
                              maxval=1)

    @jax.jit
    def run(s, acts):
        return jax.lax.scan(lambda s, a: (soft.step(s, a), None), s, acts)[0]

    return run(soft.init(jax.random.key(seed)), acts)


@pytest.mark.heavy
def test_a_substep_below_the_bound_is_stable_and_twice_it_blows_up():
    """The quadruped, 1 substep per step, random actions for 1 s: 0.95 x ``stable_dt`` stays
    finite; 2 x is refused by ``soft_quadruped`` and, with the check bypassed (the
    simulator built at a valid dt, then stepped at the large one), blows up."""
    base = quadruped.soft_quadruped()
    bound = sim.stable_dt(base.body, base.cfg)
    assert base.cfg.dt <= bound < 2 * base.cfg.dt
    below = quadruped.soft_quadruped(cfg=sim.SimConfig(dt=0.95 * bound, substeps=1))
    s = _run(below, round(1.0 / below.cfg.dt))
    assert bool(jnp.all(jnp.isfinite(s.x))) and float(jnp.abs(s.v).max()) < 10.0
    with pytest.raises(ValueError, match=r"`cfg.dt`.*exceeds the stable substep bound"):
        quadruped.soft_quadruped(cfg=sim.SimConfig(dt=2 * bound, substeps=1))
    fast = sim.SimConfig(dt=2 * bound, substeps=1)
    bypass = below._replace(step=lambda st, a: jax.lax.scan(
        lambda c, _: (sim.SoftState(*_unchecked_substep(below.body, fast, c, a)), None),
        st, None, length=1)[0])
    s = _run(bypass, round(1.0 / fast.dt))
    assert not bool(jnp.all(jnp.isfinite(s.x))) or float(jnp.abs(s.v).max()) > 1e3


def _unchecked_substep(body, cfg, state, act):
    """``sim.substep`` without its dt check (the same arithmetic)."""
    m = jnp.asarray(body.mass, state.x.dtype)
    v = state.v + cfg.dt * sim.forces(body, cfg, state.x, state.v, act) / m[:, None]
    v = sim._friction(cfg, state.x, v)
    return state.x + cfg.dt * v, v


@pytest.mark.parametrize("dt", [0.05, 1.0])
def test_large_substeps_and_stiff_materials_are_refused(dt):
    with pytest.raises(ValueError, match="`cfg.dt`"):
        quadruped.soft_quadruped(cfg=sim.SimConfig(dt=dt))
    nodes, tets = mesh.voxel_mesh([(0, 0, 0)], 0.1)
    body = fem.build(nodes, tets)
    state = sim.SoftState(jnp.asarray(body.rest), jnp.zeros((8, 3)))
    with pytest.raises(ValueError, match="`cfg.dt`"):
        sim.env_step(body, sim.SimConfig(dt=dt), state, jnp.zeros(0))
    with pytest.raises(ValueError, match="`cfg.dt`"):  # also while tracing
        jax.jit(lambda s: sim.env_step(body, sim.SimConfig(dt=dt), s, jnp.zeros(0)))(state)


def test_stiff_material_is_refused_at_the_default_substep():
    with pytest.raises(ValueError, match="`cfg.dt`"):
        quadruped.soft_quadruped(material=fem.Material(youngs=1e9))


def _cube():
    nodes, tets = mesh.voxel_mesh([(0, 0, 0)], 0.1)
    body = fem.build(nodes, tets, groups=[0, 0, 0, 1, 1, 1])
    return body, sim.SoftState(jnp.asarray(body.rest), jnp.zeros((8, 3)))


def test_eager_bad_states_and_activations_raise_naming_them():
    body, state = _cube()
    cfg = sim.SimConfig()
    with pytest.raises(ValueError, match="`activation` must lie in"):
        sim.env_step(body, cfg, state, jnp.array([1e6, 0.0]))
    with pytest.raises(ValueError, match="`state.x` must be finite"):
        sim.env_step(body, cfg, state._replace(x=state.x.at[0, 0].set(jnp.nan)), jnp.zeros(2))
    with pytest.raises(ValueError, match="`state.v`: a node moves"):
        sim.env_step(body, cfg, state._replace(v=jnp.full((8, 3), 1e30)), jnp.zeros(2))
    mirrored = state._replace(x=state.x * jnp.array([1.0, 1.0, -1.0]) + 0.2)
    with pytest.warns(RuntimeWarning, match="`state.x`: 6 inverted tets"):
        sim.env_step(body, cfg, mirrored, jnp.zeros(2))


def test_health_flags_nonfinite_and_inverted_states():
    body, state = _cube()
    health = jax.jit(lambda s: sim.health(body, s))
    ok = health(state)
    assert not bool(ok["nonfinite"]) and not bool(ok["inverted"])
    bad = health(state._replace(v=state.v.at[3, 1].set(jnp.inf)))
    assert bool(bad["nonfinite"]) and not bool(bad["inverted"])
    flipped = health(state._replace(x=state.x.at[:, 2].multiply(-1.0)))
    assert bool(flipped["inverted"]) and not bool(flipped["nonfinite"])


@pytest.fixture(scope="module")
def soft_task():
    return envs.make_task("soft_quadruped")


def test_traced_failures_end_the_episode_with_a_finite_reward(soft_task):
    """Under jit: a NaN action, a 1e30 action, a NaN state and a 1e30 velocity each give
    done = 1, reward 0 and ``info["unhealthy"]`` = 1; a healthy step keeps done = 0."""
    task = soft_task
    s0 = envs.reset(jax.random.key(0), task)
    assert float(s0.info["unhealthy"]) == 0.0 and float(s0.done) == 0.0
    step = jax.jit(lambda s, a: envs.step(task, s, a))
    ps = s0.pipeline_state
    cases = {"nan action": (s0, jnp.full(8, jnp.nan)),
             "1e30 action": (s0, jnp.full(8, 1e30)),
             "nan state": (s0._replace(pipeline_state=ps._replace(x=ps.x.at[0, 0].set(
                 jnp.nan))), jnp.zeros(8)),
             "1e30 velocity": (s0._replace(pipeline_state=ps._replace(v=jnp.full_like(
                 ps.v, 1e30))), jnp.zeros(8))}
    for name, (s, a) in cases.items():
        s1, r = step(s, a)
        assert float(s1.done) == 1.0 and float(r) == 0.0, name
        assert float(s1.info["unhealthy"]) == 1.0, name
    s1, r = step(s0, jnp.full(8, 0.5))
    assert float(s1.done) == 0.0 and float(s1.info["unhealthy"]) == 0.0
    assert np.isfinite(float(r)) and float(r) != 0.0


def test_eager_out_of_range_action_raises_naming_it(soft_task):
    s0 = envs.reset(jax.random.key(0), soft_task)
    for bad in (jnp.full(8, 1e30), jnp.full(8, 1.5)):
        with pytest.raises(ValueError, match="`action` must lie in"):
            envs.step(soft_task, s0, bad)


def test_healthy_rollout_is_unchanged_bit_for_bit(soft_task):
    """``envs.step`` of the soft task (with its health flags) gives the very states and
    rewards of the bare physics step and reward, over 6 vmapped steps."""
    task = soft_task
    soft = quadruped.soft_quadruped()
    keys = jax.random.split(jax.random.key(1), 4)
    acts = jnp.tanh(2.0 * jax.random.normal(jax.random.key(2), (6, 4, 8)))

    @jax.jit
    def checked(acts):
        def one(s, a):
            s1, r = jax.vmap(lambda s, a: envs.step(task, s, a))(s, a)
            return s1, (r, s1.pipeline_state.x, s1.done)
        return jax.lax.scan(one, jax.vmap(lambda k: envs.reset(k, task))(keys), acts)[1]

    @jax.jit
    def bare(acts):
        def one(s, a):
            s1 = jax.vmap(lambda s, a: sim.env_step(soft.body, soft.cfg, s,
                                                    jnp.clip(a, -1.0, 1.0)))(s, a)
            return s1, (jax.vmap(soft.reward)(s, s1, a), s1.x)
        return jax.lax.scan(one, jax.vmap(soft.init)(keys), acts)[1]

    r, x, done = checked(acts)
    r_ref, x_ref = bare(acts)
    assert np.asarray(x).tobytes() == np.asarray(x_ref).tobytes()
    assert np.asarray(r).tobytes() == np.asarray(r_ref).tobytes()
    assert not np.any(np.asarray(done))


def test_trainers_reset_failed_soft_environments(soft_task):
    """``train.rollout_from`` replaces an environment whose step failed by its fresh state
    (as for a terminating task) and records done = 1 and reward 0 for that step."""
    from jaxlab.rfo import train

    task = soft_task
    assert task.resets_on_done and not task.terminates
    cfg = train.TrainConfig(num_envs=2, horizon=2, hidden=8)
    policy = train.make_policy(task, cfg)
    params = policy.init(jax.random.key(0))
    state = train.reset_envs(jax.random.key(1), task, 2)
    ps = state.pipeline_state
    state = state._replace(pipeline_state=ps._replace(x=ps.x.at[0, 0, 0].set(jnp.nan)))
    fresh = train.reset_envs(jax.random.key(2), task, 2)
    final, rewards, _, _, _, dones = jax.jit(
        lambda st: train.rollout_from(jax.random.key(3), task, cfg, policy, params, st, 2,
                                      fresh))(state)
    dones, rewards = np.asarray(dones), np.asarray(rewards)
    assert dones[0].tolist() == [1.0, 0.0] and rewards[0, 0] == 0.0
    assert np.all(np.isfinite(rewards)) and np.all(np.isfinite(np.asarray(final.obs)))
    assert np.all(np.isfinite(np.asarray(final.pipeline_state.x)))
