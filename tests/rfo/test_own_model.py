"""A user's MJX model: brax's fusion of jointless bodies is detected and named, bodies and
sites are looked up by name, ``new_task`` without ``init_q``, the non-finite gradient
limit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.rfo import envs, train

ARM = """<mujoco><compiler angle="radian"/><worldbody>
  <body name="arm" pos="0 0 1">
    <joint name="hinge" type="hinge" axis="0 1 0"/>
    <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.05" mass="1"/>
    <body name="tip" pos="0.5 0 0"><geom size="0.05" mass="0.1"/><site name="tip_site"/></body>
  </body>
  <body name="marker" pos="1 0 0"><joint name="slide" type="slide" axis="1 0 0"/>
    <geom size="0.05" mass="0.1"/></body>
</worldbody><actuator><motor joint="hinge"/></actuator></mujoco>"""


def test_fused_body_is_named_instead_of_silently_shifting_indices():
    import mujoco

    assert envs.fused_bodies(ARM) == {"tip": "arm"}
    raw = mujoco.MjModel.from_xml_string(ARM)
    sys = envs.load_mjcf(ARM)
    assert raw.nbody == 4 and sys.mj_model.nbody == 3  # brax did fuse "tip" away
    with pytest.raises(ValueError, match="body 'tip' has no joint, so brax fuses it into "
                                         r"'arm' \(its sites \['tip_site'\] move there\)"):
        envs.load_mjcf(ARM, require_bodies=("arm", "tip"))
    with pytest.raises(ValueError, match="no body named 'hand'"):
        envs.load_mjcf(ARM, require_bodies=("hand",))
    with pytest.raises(ValueError, match="body 'tip' is not in the loaded system"):
        envs.body_index(sys, "tip")
    # In the file "marker" is the third body; in brax's model it is the second.
    assert envs.body_index(envs.load_mjcf(ARM, require_bodies=("marker",)), "marker") == 1


@pytest.mark.heavy
def test_names_point_at_the_right_body_and_site():
    """Positions read through body_index / site_index against the MJCF geometry: the arm
    rotates about y at (0, 0, 1); the tip site sits 0.5 along the arm."""
    from brax.mjx import pipeline

    sys = envs.load_mjcf(ARM)
    theta = 0.3
    ps = pipeline.init(sys, jnp.array([theta, 0.2]), jnp.zeros(2))
    np.testing.assert_allclose(ps.x.pos[envs.body_index(sys, "marker")], [1.2, 0, 0],
                               atol=1e-5)
    np.testing.assert_allclose(ps.x.pos[envs.body_index(sys, "arm")], [0, 0, 1], atol=1e-5)
    # hinge about +y: x' = cos(theta) * 0.5, z' = 1 - sin(theta) * 0.5
    want = [0.5 * np.cos(theta), 0.0, 1.0 - 0.5 * np.sin(theta)]
    np.testing.assert_allclose(ps.site_xpos[envs.site_index(sys, "tip_site")], want,
                               atol=1e-5)
    with pytest.raises(ValueError, match="site 'hand' is not in the loaded system"):
        envs.site_index(sys, "hand")


@pytest.mark.heavy
def test_task_needs_init_q_only_without_reset_fn():
    sys = envs.load_mjcf(ARM)
    kw = dict(n_frames=1, obs_fn=lambda ps: ps.q, reward_fn=lambda a, b, u: b.q[0],
              obs_dim=2, act_dim=1)
    with pytest.raises(ValueError, match="`init_q` and `reset_noise` are needed"):
        envs.new_task("t", sys, **kw)
    with pytest.raises(ValueError, match="`init_q` and `reset_noise` are needed"):
        envs.Task("t", sys, 1, jnp.zeros(2), None, kw["obs_fn"], kw["reward_fn"], 2, 1)
    t = envs.new_task("t", sys, reset_fn=lambda k: (jnp.array([0.1, 0.0]), jnp.zeros(2)),
                      **kw)
    np.testing.assert_allclose(envs.reset(jax.random.key(0), t).obs, [0.1, 0.0])
    t = envs.new_task("t", sys, init_q=jnp.array([0.2, 0.0]), reset_noise=0.0, **kw)
    np.testing.assert_allclose(envs.reset(jax.random.key(0), t).obs, [0.2, 0.0])


def test_nonfinite_gradient_share_limit():
    g = np.array([[1.0, np.nan, 2.0, 3.0], [np.inf, 1.0, 1.0, 1.0]])
    assert train.check_nonfinite_grad_share(g, 0.25) == 0.25
    assert train.check_nonfinite_grad_share(g, 1.0) == 0.25
    with pytest.raises(FloatingPointError, match=r"25.0% of updates \(2 of 8\).*limit 20.0%"):
        train.check_nonfinite_grad_share(g, 0.2, "pendulum rfo")
    with pytest.raises(ValueError, match="`limit`"):
        train.check_nonfinite_grad_share(g, 1.5)


def test_config_limit_is_checked_and_keys_the_unit_only_when_set():
    from experiments import rfo as exp
    from experiments.configs import rfo as rfo_configs

    c = rfo_configs.get_config("smoke")
    t, m = c.tasks[0], "rfo"
    assert "max_nonfinite_grad_share" not in exp.run_spec(c, t, m)
    c.max_nonfinite_grad_share = 0.1
    assert exp.run_spec(c, t, m)["max_nonfinite_grad_share"] == 0.1
    c.max_nonfinite_grad_share = -0.1
    with pytest.raises(ValueError, match="`config.max_nonfinite_grad_share`"):
        rfo_configs.validate_config(c)
