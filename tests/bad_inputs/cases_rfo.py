"""Bad-input cases for jaxlab.rfo (train/PPO configs, critic, GAE, flow, regularisers, envs,
experiment config)."""

import tempfile

import jax
import jax.numpy as jnp
import numpy as np

from tests.bad_inputs.harness import Case


def _task(name="pendulum"):
    from jaxlab.rfo import envs

    return envs.make_task(name)


def _train(**over):
    from jaxlab import rfo

    kw = dict(num_envs=2, horizon=4)
    kw.update(over)
    return rfo.make_trainer(_task(), rfo.TrainConfig(**kw))


def _ppo(**over):
    from jaxlab import rfo

    kw = dict(num_envs=2, rollout_len=4, minibatches=2, episode_length=8)
    kw.update(over)
    return rfo.make_trainer(_task(), rfo.PPOConfig(**kw))


def _td(r=None, v=None, gamma=0.9, lam=0.5, **kw):
    from jaxlab.rfo import critic

    r = jnp.ones((5, 3)) if r is None else jnp.asarray(r)
    v = jnp.ones((6, 3)) if v is None else jnp.asarray(v)
    return critic.td_lambda_targets(r, v, gamma, lam, **kw)


def _gae(r=None, v=None, gamma=0.9, lam=0.5, **kw):
    from jaxlab.rfo import ppo

    r = jnp.ones((5, 3)) if r is None else jnp.asarray(r)
    v = jnp.ones((6, 3)) if v is None else jnp.asarray(v)
    return ppo.gae(r, v, gamma, lam, **kw)


def _optimizer(**over):
    from jaxlab import rfo
    from jaxlab.rfo import train as rfo_train

    return rfo_train.make_optimizer(rfo.TrainConfig(**over)).init(jnp.zeros(3))


def _buffer_add(obs=None, actions=None):
    from jaxlab.rfo import buffer

    buf = buffer.init(4, 3, 2, 1)
    obs = jnp.ones((2, 3)) if obs is None else obs
    actions = jnp.zeros((2, 2, 1)) if actions is None else actions
    return buffer.add(buf, obs, actions)


def _polyak(alpha):
    from jaxlab.rfo import critic

    return critic.polyak({"w": jnp.zeros(3)}, {"w": jnp.ones(3)}, alpha)


def _flow():
    from jaxlab.rfo import flow

    cfg = flow.FlowConfig(obs_dim=3, act_dim=2, chunk=2, hidden=8)
    graphdef, params = flow.init(jax.random.key(0), cfg)
    return flow, cfg, graphdef, params


def _sample(obs):
    flow, cfg, graphdef, params = _flow()
    return flow.sample(jax.random.key(0), graphdef, params, cfg, jnp.asarray(obs))


def _integrate(obs, noise):
    flow, cfg, graphdef, params = _flow()
    return flow.integrate(graphdef, params, jnp.asarray(obs), jnp.asarray(noise), 4)


def _stability(obs, actions):
    from jaxlab.rfo import regularizers

    _, _, graphdef, params = _flow()
    return regularizers.stability_loss(jax.random.key(0), graphdef, params, jnp.asarray(obs),
                                       jnp.asarray(actions))


def _exploration(action_shape):
    from jaxlab.rfo import regularizers

    _, _, graphdef, params = _flow()
    return regularizers.exploration_loss(jax.random.key(0), graphdef, params,
                                         jnp.zeros((4, 3)), action_shape)


def _cfm(target):
    from jaxlab.rfo import regularizers

    _, _, graphdef, params = _flow()
    return regularizers.cfm_loss(jax.random.key(0), graphdef, params, jnp.zeros((4, 3)),
                                 jnp.asarray(target))


def _env_step(action):
    from jaxlab.rfo import envs

    # The action is checked before the state is read, so a placeholder state keeps the case
    # cheap (a real ``envs.reset`` costs ~30 s of eager MJX work on CPU).
    task = _task()
    state = envs.EnvState(None, jnp.zeros(task.obs_dim), jnp.int32(0), jnp.float32(0))
    return envs.step(task, state, jnp.asarray(action))


def _register(name, factory=lambda: None):
    from jaxlab import rfo

    return rfo.register_task(name, factory)


def _rollout(horizon, num_envs=2):
    from jaxlab.rfo import train

    task = _task()
    cfg = train.TrainConfig(num_envs=2, horizon=4, chunk=2)
    policy = train.make_policy(task, cfg)
    return train.rollout(jax.random.key(0), task, cfg, policy, policy.init(jax.random.key(0)),
                         num_envs, horizon)


def _make_trainer_with(cfg):
    from jaxlab import rfo

    return rfo.make_trainer(_task(), cfg)


def _experiment(**over):
    """train_and_evaluate on a tiny smoke config with one (dotted) field changed."""
    from experiments import rfo as experiment
    from experiments.configs import rfo as rcfg
    from experiments.lib import study

    cfg = rcfg.get_config("smoke")
    cfg.methods = ("apg",)
    cfg.env_steps = 2 * 4
    cfg.task_env_steps = {}
    cfg.num_chunks = 1
    cfg.common.update(num_envs=2, horizon=4, eval_horizon=4, episode_length=4, hidden=8)
    cfg.throughput.task = ""
    for k, v in over.items():
        node = cfg
        *path, leaf = k.split(".")
        for p in path:
            node = node[p]
        node[leaf] = v
    return study.train_and_evaluate(experiment.EXPERIMENT, cfg,
                                    tempfile.mkdtemp(prefix="bad_rfo_"))


CASES = [
    # RFO / APG training settings.
    Case("rfo.TrainConfig.lr_zero", lambda: _train(lr=0.0), "lr"),
    Case("rfo.TrainConfig.lr_nan", lambda: _train(lr=float("nan")), "lr"),
    Case("rfo.TrainConfig.buffer_size_zero", lambda: _train(stability_coef=0.1, buffer_size=0),
         "buffer_size"),
    Case("rfo.TrainConfig.grad_clip_mode_unknown", lambda: _train(grad_clip_mode="norm"),
         "grad_clip_mode"),
    Case("rfo.TrainConfig.lr_decay_zero", lambda: _train(lr_decay=0.0), "lr_decay"),
    Case("rfo.config.apg_lr_decay_above_one", lambda: _experiment(**{"apg.lr_decay": 1.5}),
         "apg.lr_decay"),
    Case("rfo.config.buffer_size_zero", lambda: _experiment(**{"rfo.buffer_size": 0}),
         "rfo.buffer_size"),
    Case("rfo.TrainConfig.grad_clip_zero", lambda: _train(grad_clip=0.0), "grad_clip"),
    Case("rfo.TrainConfig.gamma_above_one", lambda: _train(gamma=1.5), "gamma"),
    Case("rfo.TrainConfig.td_lambda_above_one", lambda: _train(critic=True, td_lambda=1.5),
         "td_lambda"),
    Case("rfo.TrainConfig.target_alpha_above_one",
         lambda: _train(critic=True, target_alpha=1.5), "target_alpha"),
    Case("rfo.TrainConfig.critic_lr_zero", lambda: _train(critic=True, critic_lr=0.0),
         "critic_lr"),
    Case("rfo.TrainConfig.stability_coef_negative", lambda: _train(stability_coef=-1.0),
         "stability_coef"),
    Case("rfo.TrainConfig.exploration_coef_nan", lambda: _train(exploration_coef=float("nan")),
         "exploration_coef"),
    Case("rfo.TrainConfig.hidden_zero", lambda: _train(hidden=0), "hidden"),
    Case("rfo.TrainConfig.num_envs_zero", lambda: _train(num_envs=0), "num_envs"),
    # PPO settings.
    Case("rfo.PPOConfig.lr_zero", lambda: _ppo(lr=0.0), "lr"),
    Case("rfo.PPOConfig.clip_eps_zero", lambda: _ppo(clip_eps=0.0), "clip_eps"),
    Case("rfo.PPOConfig.gae_lambda_above_one", lambda: _ppo(gae_lambda=1.5), "gae_lambda"),
    Case("rfo.PPOConfig.gamma_negative", lambda: _ppo(gamma=-0.1), "gamma"),
    Case("rfo.PPOConfig.vf_coef_negative", lambda: _ppo(vf_coef=-1.0), "vf_coef"),
    Case("rfo.PPOConfig.ent_coef_nan", lambda: _ppo(ent_coef=float("nan")), "ent_coef"),
    Case("rfo.PPOConfig.reward_scale_zero", lambda: _ppo(reward_scale=0.0), "reward_scale"),
    Case("rfo.PPOConfig.grad_clip_negative", lambda: _ppo(grad_clip=-1.0), "grad_clip"),
    Case("rfo.PPOConfig.hidden_zero", lambda: _ppo(hidden=0), "hidden"),
    # TD(lambda) targets, GAE, Polyak.
    Case("rfo.td_lambda_targets.rewards_nan", lambda: _td(r=jnp.full((5, 3), jnp.nan)),
         "rewards"),
    Case("rfo.td_lambda_targets.values_inf", lambda: _td(v=jnp.full((6, 3), jnp.inf)), "values"),
    Case("rfo.td_lambda_targets.gamma_above_one", lambda: _td(gamma=1.5), "gamma"),
    Case("rfo.td_lambda_targets.values_batch_mismatch", lambda: _td(v=jnp.ones((6, 4))),
         "values"),
    Case("rfo.td_lambda_targets.termination_not_binary",
         lambda: _td(termination=jnp.full((5, 3), 0.5)), "termination"),
    Case("rfo.gae.lam_above_one", lambda: _gae(lam=1.5), "lam"),
    Case("rfo.gae.gamma_nan", lambda: _gae(gamma=float("nan")), "gamma"),
    Case("rfo.gae.rewards_inf", lambda: _gae(r=jnp.full((5, 3), jnp.inf)), "rewards"),
    Case("rfo.gae.values_batch_mismatch", lambda: _gae(v=jnp.ones((6, 4))), "values"),
    Case("rfo.gae.truncation_shape", lambda: _gae(truncation=jnp.zeros((4, 3))), "truncation"),
    Case("rfo.polyak.alpha_above_one", lambda: _polyak(1.5), "alpha"),
    Case("rfo.polyak.alpha_negative", lambda: _polyak(-0.1), "alpha"),
    # Flow policy and regularisers.
    Case("rfo.flow.sample.obs_nan", lambda: _sample(jnp.full((4, 3), jnp.nan)), "obs"),
    Case("rfo.flow.integrate.noise_width", lambda: _integrate(jnp.zeros((4, 3)),
                                                              jnp.zeros((4, 3))), "noise"),
    Case("rfo.flow.integrate.batch_mismatch", lambda: _integrate(jnp.zeros((4, 3)),
                                                                 jnp.zeros((5, 4))), "noise"),
    Case("rfo.stability_loss.actions_outside_box",
         lambda: _stability(jnp.zeros((4, 3)), jnp.full((4, 2, 2), 3.0)), "actions"),
    Case("rfo.stability_loss.actions_nan",
         lambda: _stability(jnp.zeros((4, 3)), jnp.full((4, 2, 2), jnp.nan)), "actions"),
    Case("rfo.stability_loss.batch_mismatch",
         lambda: _stability(jnp.zeros((4, 3)), jnp.zeros((5, 2, 2))), "actions"),
    Case("rfo.exploration_loss.action_shape_zero", lambda: _exploration((0, 2)), "action_shape"),
    Case("rfo.cfm_loss.target_nan", lambda: _cfm(jnp.full((4, 4), jnp.nan)), "target"),
    # Environments and rollouts.
    Case("rfo.envs.make_task.unknown", lambda: _task("walker"), "name"),
    Case("rfo.envs.register_task.duplicate_name", lambda: _register("pendulum"), "name"),
    Case("rfo.envs.register_task.empty_name", lambda: _register(""), "name"),
    Case("rfo.envs.register_task.name_not_str", lambda: _register(3), "name"),
    Case("rfo.envs.register_task.factory_not_callable",
         lambda: _register("bad_inputs_task", factory=None), "factory"),
    Case("rfo.envs.step.action_shape", lambda: _env_step(jnp.zeros(3)), "action"),
    Case("rfo.envs.step.action_nan", lambda: _env_step(jnp.full(1, jnp.nan)), "action"),
    Case("rfo.rollout.horizon_not_multiple_of_chunk", lambda: _rollout(3), "horizon"),
    Case("rfo.rollout.num_envs_zero", lambda: _rollout(4, num_envs=0), "num_envs"),
    # Trainer constructor and experiment config (validate_config, first thing in the study).
    Case("rfo.make_trainer.config_type", lambda: _make_trainer_with({"policy": "flow"}),
         "cfg"),
    Case("rfo.config.num_seeds_one", lambda: _experiment(num_seeds=1), "num_seeds"),
    Case("rfo.config.common_lr_negative", lambda: _experiment(**{"common.lr": -1e-3}),
         "config.common.lr"),
    Case("rfo.config.common_gamma_above_one", lambda: _experiment(**{"common.gamma": 1.5}),
         "config.common.gamma"),
    Case("rfo.config.ppo_lr_zero", lambda: _experiment(methods=("ppo",), **{"ppo.lr": 0.0}),
         "config.ppo.lr"),
    Case("rfo.config.stability_coef_negative",
         lambda: _experiment(methods=("rfo",), **{"rfo.stability_coef": -1.0}),
         "config.rfo.stability_coef"),
    Case("rfo.config.unknown_task", lambda: _experiment(tasks=("walker",)), "config.tasks"),
    Case("rfo.config.env_steps_zero", lambda: _experiment(env_steps=0), "config.env_steps"),
    Case("rfo.config.num_chunks_zero", lambda: _experiment(num_chunks=0), "config.num_chunks"),
    # make_optimizer checks its config first (review).
    Case("rfo.make_optimizer.grad_clip_mode_unknown", lambda: _optimizer(grad_clip_mode="norm"),
         "grad_clip_mode"),
    Case("rfo.make_optimizer.lr_decay_above_one", lambda: _optimizer(lr_decay=1.5), "lr_decay"),
    Case("rfo.make_optimizer.lr_decay_string", lambda: _optimizer(lr_decay="0.9"), "lr_decay"),
    Case("rfo.make_optimizer.lr_decay_bool", lambda: _optimizer(lr_decay=True), "lr_decay"),
    Case("rfo.make_optimizer.lr_nan", lambda: _optimizer(lr=float("nan")), "lr"),
    Case("rfo.make_optimizer.grad_clip_zero", lambda: _optimizer(grad_clip=0.0), "grad_clip"),
    # buffer.add: floating dtypes, finite concrete rows.
    Case("rfo.buffer.add_obs_int", lambda: _buffer_add(obs=jnp.ones((2, 3), jnp.int32)), "obs"),
    Case("rfo.buffer.add_actions_int", lambda: _buffer_add(
        actions=jnp.ones((2, 2, 1), jnp.int32)), "actions"),
    Case("rfo.buffer.add_obs_nan", lambda: _buffer_add(
        obs=jnp.ones((2, 3)).at[0, 1].set(jnp.nan)), "obs"),
    Case("rfo.buffer.add_actions_inf", lambda: _buffer_add(
        actions=jnp.ones((2, 2, 1)).at[1, 0, 0].set(jnp.inf)), "actions"),
]


# The study's protocol, the trainers' drivers and the task helpers. Every bad argument below
# is refused before a trainer is built or an environment is stepped: placeholders stand in
# for arguments the check never reaches.
_SYS_XML = """<mujoco><worldbody><body name="arm"><joint name="j" type="hinge"/>
<geom size="0.1"/><site name="arm_site"/></body></worldbody>
<actuator><motor joint="j"/></actuator></mujoco>"""


def _sys():
    from jaxlab.rfo import envs

    return envs.load_mjcf(_SYS_XML)


def _rfo_compare(problem="pendulum", **kw):
    from jaxlab import rfo

    return rfo.compare(jax.random.key(0), problem, progress=False, **kw)


def _new_task(**over):
    from jaxlab.rfo import envs

    kw = dict(n_frames=2, obs_fn=lambda ps: ps, reward_fn=lambda ps0, ps1, a: 0.0, obs_dim=2,
              act_dim=1, reset_fn=lambda key: (jnp.zeros(1), jnp.zeros(1)))
    kw.update(over)
    return envs.new_task("bad_inputs_new_task", None, **kw)


def _settings(**over):
    from jaxlab.rfo import comparison

    return comparison.Settings()._replace(**over)


def _tiny_cfg():
    from jaxlab import rfo

    return rfo.TrainConfig(num_envs=2, horizon=4, num_updates=2)


CASES += [
    Case("rfo.compare: unknown task name", lambda: _rfo_compare("walker"), "`problem`"),
    Case("rfo.compare: unknown metric", lambda: _rfo_compare(metrics=("return",)),
         "`metrics`"),
    Case("rfo.comparison.contender: grid a single dict",
         lambda: _comparison("contender", _tiny_cfg(), grid={"lr": 1e-3}), "`grid`"),
    Case("rfo.comparison.contender: a built-in's name, not a config",
         lambda: _comparison("contender", "rfo"), "`config`"),
    Case("rfo.comparison.contender_config: num_envs 0",
         lambda: _comparison("contender_config", "rfo", _settings(num_envs=0)),
         "`settings.num_envs`"),
    Case("rfo.comparison.contender_config: unknown name",
         lambda: _comparison("contender_config", "sac"), "`name`"),
    Case("rfo.seeds.final_return: one seed's 1-D curve",
         lambda: _seeds("final_return", np.ones(5)), "`eval_return`"),
    Case("rfo.seeds.auc: no evaluations",
         lambda: _seeds("auc", np.ones((3, 0))), "`eval_return`"),
    Case("rfo.seeds.seed_program: cfg a Settings",
         lambda: _seeds("seed_program", _task(), _settings()), "`cfg`"),
    Case("rfo.seeds.seed_program: chunks 0",
         lambda: _seeds("seed_program", _task(), _tiny_cfg(), chunks=0), "`chunks`"),
    Case("rfo.seeds.train_seeds: one key, not [n] keys",
         lambda: _seeds("train_seeds", jax.random.key(0), _task(), _tiny_cfg()), "`keys`"),
    Case("rfo.env_steps_per_update: cfg a Settings",
         lambda: _trainers("env_steps_per_update", _settings()), "`cfg`"),
    # (the length is refused before the trainer or state is read: placeholders)
    Case("rfo.scan_steps: length 0",
         lambda: _trainers("scan_steps", jax.random.key(0), None, None, 0, 0), "`length`"),
    Case("rfo.scan_steps: eval_every 2.5",
         lambda: _trainers("scan_steps", jax.random.key(0), None, None, 0, 4, 2.5),
         "`eval_every`"),
    Case("rfo.check_nonfinite_grad_share: limit given in percent",
         lambda: _train_fn("check_nonfinite_grad_share", np.ones(4), 5.0), "`limit`"),
    Case("rfo.envs.reset: task given by name",
         lambda: _envs("reset", jax.random.key(0), "pendulum"), "`task`"),
    Case("rfo.envs.reset: key and task swapped",
         lambda: _envs("reset", _task(), jax.random.key(0)), "`key`"),
    Case("rfo.envs.body_index: a Task, not its sys", lambda: _envs("body_index", _task(), "pole"),
         "`sys`"),
    Case("rfo.envs.body_index: unknown body", lambda: _envs("body_index", _sys(), "leg"),
         "`name`"),
    Case("rfo.envs.site_index: unknown site", lambda: _envs("site_index", _sys(), "tip"),
         "`name`"),
    Case("rfo.envs.fused_bodies: a file name given as xml",
         lambda: _envs("fused_bodies", "robot.xml"), "`xml`"),
    Case("rfo.envs.fused_bodies: both xml and path",
         lambda: _envs("fused_bodies", _SYS_XML, "robot.xml"), "`path`"),
    Case("rfo.envs.load_mjcf: require_bodies one string",
         lambda: _envs("load_mjcf", _SYS_XML, require_bodies="arm"), "`require_bodies`"),
    Case("rfo.envs.load_mjcf: require_bodies names no body",
         lambda: _envs("load_mjcf", _SYS_XML, require_bodies=("leg",)), "`require_bodies`"),
    Case("rfo.envs.new_task: n_frames 0", lambda: _new_task(n_frames=0), "`n_frames`"),
    Case("rfo.envs.new_task: act_dim 0", lambda: _new_task(act_dim=0), "`act_dim`"),
    Case("rfo.envs.new_task: obs_fn not callable", lambda: _new_task(obs_fn=None), "`obs_fn`"),
]


def _comparison(fn, *args, **kw):
    from jaxlab.rfo import comparison

    return getattr(comparison, fn)(*args, **kw)


def _seeds(fn, *args, **kw):
    from jaxlab.rfo import seeds

    return getattr(seeds, fn)(*args, **kw)


def _trainers(fn, *args, **kw):
    from jaxlab.rfo import trainers

    return getattr(trainers, fn)(*args, **kw)


def _train_fn(fn, *args, **kw):
    from jaxlab.rfo import train

    return getattr(train, fn)(*args, **kw)


def _envs(fn, *args, **kw):
    from jaxlab.rfo import envs

    return getattr(envs, fn)(*args, **kw)
