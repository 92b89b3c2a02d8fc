"""RFO: reparameterization flow policy optimization (arXiv 2602.03501) and its baselines.

Every method of the study has the same shape (``jaxlab.core.types.Algorithm``,
blackjax/optax style)::

    trainer = rfo.make_trainer(task, cfg)   # cfg: TrainConfig (flow / gaussian) or PPOConfig
    state = trainer.init(key)               # State: policy (and critic) weights drawn from key
    state, info = trainer.step(key, state)  # one update -> (State, Info)
    state, infos = rfo.run(key, trainer, n) # n updates in one lax.scan (jit / vmap over keys)

* ``TrainConfig(policy="flow")``: RFO, a flow policy (``flow``) trained by backpropagating
  the return of a short MJX rollout (``envs``) through the Euler ODE and the dynamics, with
  the CFM regularisers (``regularizers``) and an optional SHAC critic (``critic``);
* ``TrainConfig(policy="gaussian")``: a Gaussian policy through the same loss: with
  ``critic=True`` SHAC with a Gaussian policy (the experiment's ``shac_gaussian``), with
  ``critic=False, episode_length=0, grad_clip_mode="elementwise", lr_decay < 1`` the
  critic-free brax-style APG baseline (``apg``);
* the stability regulariser's FIFO buffer of past data: ``buffer``;
* ``PPOConfig``: the PPO baseline (``ppo``).

``State`` is ``RFOState | PPOState`` (the state of whichever method ``cfg`` selects);
``Info`` (train return, eval return, pre-clip grad norm, critic loss) is shared.

Tasks: ``make_task(name)`` for a name of ``task_names()`` (built in: ``bouncing_ball``,
``cartpole``, ``hopper``, ``pendulum``, ``reacher``, ``soft_quadruped``,
``soft_quadruped_gait``);
``register_task(name, factory)`` adds an MJCF task (``new_task`` / ``envs.Task``,
``load_mjcf``; MJCF angles are in degrees unless ``<compiler angle="radian"/>``; brax fuses
bodies without a joint into their parent: look bodies and sites up with ``body_index`` /
``site_index``, see ``fused_bodies``); a task without MJCF brings its own physics
(``Task(init_state_fn=..., step_fn=...)``), as ``soft_quadruped`` does with the pure-JAX
soft-body simulator ``softbody`` (tetrahedral FEM, muscles, ground contact).
``check_nonfinite_grad_share`` fails a run with too many non-finite gradients. The
functional forms ``init(key, task, cfg)`` and ``step(key, state, task, cfg)`` take the
static arguments last. Different keys give different initial weights; the same key gives
the same run.

The study's comparison on any task (``comparison``): ``compare(key, task, *, contenders,
tuning, seeds, metrics, settings, ...)`` trains every contender (``CONTENDERS`` by name,
your config through ``contender(config, settings)``, or a ``protocol.Contender``) on the
same seeds at an equal budget (``Settings``) and returns a ``protocol.Comparison`` of final
returns and learning-curve areas with paired bootstrap CIs; ``train_seeds`` /
``seed_program`` (``seeds``) are the per-seed runs the study binary shares.

Reading a return (``references``): what open-loop action sequences earn on a task (zero
action, best constant posture, best random sinusoid gait, trajectory optimisation through
the simulator); ``make_trainer(..., deterministic_eval=True)`` also evaluates each
policy's mode (``Info.eval_mode_return``) beside its stochastic return.
"""

from jaxlab.rfo import comparison, envs, references, seeds, softbody
from jaxlab.rfo.comparison import (
    CONTENDERS,
    METRICS,
    Settings,
    compare,
    contender,
    contender_config,
)
from jaxlab.rfo.envs import (
    TASK_NAMES,
    EnvState,
    Task,
    body_index,
    fused_bodies,
    load_mjcf,
    make_task,
    new_task,
    register_task,
    site_index,
    task_names,
)
from jaxlab.rfo.ppo import PPOConfig, PPOState
from jaxlab.rfo.seeds import (
    Curves,
    SeedProgram,
    auc,
    final_return,
    schedule,
    seed_program,
    train_seeds,
)
from jaxlab.rfo.train import (
    Info,
    RFOState,
    TrainConfig,
    check_nonfinite_grad_share,
)
from jaxlab.rfo.trainers import (
    Config,
    State,
    env_steps_per_update,
    init,
    make_trainer,
    run,
    scan_steps,
    step,
)

__all__ = [
    "CONTENDERS", "METRICS", "TASK_NAMES", "Config", "Curves", "EnvState", "Info", "PPOConfig",
    "PPOState", "RFOState", "SeedProgram", "Settings", "State", "Task", "TrainConfig", "auc",
    "body_index", "check_nonfinite_grad_share", "compare", "comparison", "contender",
    "contender_config", "env_steps_per_update", "envs", "final_return",
    "fused_bodies", "init", "load_mjcf", "make_task", "make_trainer", "new_task",
    "references", "run", "register_task", "scan_steps", "schedule", "seed_program", "seeds",
    "site_index", "softbody",
    "step", "task_names", "train_seeds",
]
