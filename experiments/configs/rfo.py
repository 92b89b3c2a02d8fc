"""Configs for experiments/rfo.py: get_config("smoke" | "quick" | "cpu_ablation" |
"cpu_long" | "full" | "soft_smoke" | "soft_study" | "soft_gait_smoke").

``quick`` (the suite's main job, a first look): pendulum, RFO vs SHAC with a Gaussian
policy (the declared ratio's rival: the same short-horizon loss and critic, so the pair
isolates the flow policy and its regularisers) and PPO (the strongest baseline on pendulum,
which beats RFO there: a first look shows it), 3 seeds, 49k env steps per seed and method,
32 environments, evaluation every few updates (mostly compiles on a 2-core CPU: each
method is one large MJX program). Critic-free APG (about 30 s of compiling), reacher
(about 80 s per method) and the physics throughput are left to the other presets
(``cpu_ablation``, ``cpu_long``, whose figures the README reports, ``full``).
``cpu_ablation``: pendulum only, the four regulariser settings (``rfo_none``,
``rfo_stability``, ``rfo_exploration``, ``rfo`` = both) and the two baselines named for
what they are (``shac_gaussian``, critic-free ``apg``), 5 seeds, on a CPU budget.
``cpu_long`` (the README's RFO figures; about an hour on a 2-core CPU): pendulum (every
method, the ablations included), reacher and hopper (RFO, SHAC, APG, PPO), 5 seeds drawn
from ``seed`` = 2026 (never used by any other preset, so never used to pick a setting),
197k env steps per seed and method (131k on hopper), and the physics throughput of MJX
and brax's generalized backend, forward and forward + backward, at B = 1/8/32/64.
``full``: accelerator scale (256 environments, 1M env steps, 4M on hopper, 8 seeds).
``soft_smoke`` (CI size, about a minute on a 2-core CPU, mostly compiles) and
``soft_study``: the soft-body quadruped (``soft_quadruped``, no MJCF). ``soft_study`` is
declared before it runs: RFO with the regularisers on (``rfo``) and off (``rfo_none``)
vs SHAC with a Gaussian policy, critic-free APG and PPO, 5 paired seeds drawn from
``seed`` = 4242 (used by no other preset), 98,304 env steps per seed and method (equal
across methods; 491,520 per method over the seeds, a few hours per method on a 2-core
CPU at the forward + backward rate ``experiments/bench_softbody.py`` measures), 32
environments, 32-step horizons, 128-step episodes (2.56 s) and
evaluations; metrics: final eval return and AUC per method with t 95% CIs, the paired
differences RFO - rival, and the ratio of mean final returns RFO / SHAC-Gaussian with a
paired-bootstrap 95% CI beside the paper's ~2x. No MJX throughput unit (the simulator's
speed: ``experiments/bench_softbody.py``).

``soft_gait_smoke``: ``soft_smoke``'s sizes on ``soft_quadruped_gait`` (the forward
velocity paid only after a 64-step settle window, so 128-step episodes), with
``deterministic_eval`` (each evaluation also runs every policy's mode) and
``keep_policies`` (final weights and centre-of-mass plots under
``<workdir>/policies``); both flags default to off in the other presets.

``validate_config(config)`` checks every field of a config (the study's first step).
"""

import ml_collections


def get_config(arg: str = "quick") -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.tasks = ("pendulum",)
    c.methods = ("rfo", "shac_gaussian", "apg", "ppo")
    # per-task subsets of ``methods`` (none in quick; each reacher method costs ~80 s of
    # compile on a 2-core CPU, each hopper one ~150 s)
    c.task_methods = ml_collections.ConfigDict()
    c.num_seeds = 3
    c.seed = 0
    c.env_steps = 49_152  # budget per method and task (equal across methods)
    c.task_env_steps = ml_collections.ConfigDict()
    c.num_chunks = 4
    # evaluate after every eval_every-th update at most (experiment.eval_every picks the
    # largest divisor of the updates per chunk <= this); evaluations are not env steps
    c.eval_every = 10
    # Fail a (task, method) run when more than this share of its updates had a non-finite
    # policy gradient (zeroed inside the update; counted per seed). 1.0 = never fail.
    c.max_nonfinite_grad_share = 1.0
    c.mesh_shape = (-1,)
    c.common = ml_collections.ConfigDict(dict(
        num_envs=32, horizon=32, lr=3e-3, hidden=64, eval_horizon=128, episode_length=128,
        critic=True, gamma=0.99))
    c.rfo = ml_collections.ConfigDict(dict(chunk=4, ode_steps=4, stability_coef=0.01,
                                           exploration_coef=0.001, buffer_size=4096))
    # critic-free brax-style APG (brax/training/agents/apg): element-wise clip 1.0,
    # Adam(0.7, 0.95), lr * lr_decay^update; the decay rate is our choice
    c.apg = ml_collections.ConfigDict(dict(lr=3e-3, lr_decay=0.997, grad_clip=1.0))
    c.ppo = ml_collections.ConfigDict(dict(epochs=4, minibatches=4, lr=3e-4))
    # physics throughput ("": not measured, as in quick; smoke: pendulum; cpu_long: hopper)
    c.throughput = ml_collections.ConfigDict(dict(task="", batch_sizes=(1, 32),
                                                  horizon=32, backends=("mjx", "generalized")))
    if arg == "smoke":
        c.tasks = ("pendulum",)
        c.task_methods = ml_collections.ConfigDict()
        c.num_seeds = 2
        c.env_steps = 4 * 8 * 16
        c.task_env_steps = ml_collections.ConfigDict({"pendulum": 4 * 8 * 16})
        c.num_chunks = 2
        c.eval_every = 2
        c.common.update(num_envs=8, horizon=16, eval_horizon=32, episode_length=32,
                        hidden=32)
        c.throughput.update(task="pendulum", batch_sizes=(1, 8), horizon=16)
    elif arg == "cpu_ablation":
        c.tasks = ("pendulum",)
        c.methods = ("rfo_none", "rfo_stability", "rfo_exploration", "rfo", "shac_gaussian",
                     "apg")
        c.task_methods = ml_collections.ConfigDict()
        c.num_seeds = 5
        c.task_env_steps = ml_collections.ConfigDict()
        c.throughput.task = ""
    elif arg == "cpu_long":
        c.tasks = ("pendulum", "reacher", "hopper")
        c.methods = ("rfo", "shac_gaussian", "apg", "ppo")
        c.task_methods = ml_collections.ConfigDict({"pendulum": (
            "rfo", "rfo_chunked", "rfo_none", "rfo_stability", "rfo_exploration",
            "shac_gaussian", "apg", "ppo")})
        c.num_seeds = 5
        c.seed = 2026
        c.env_steps = 196_608
        c.task_env_steps = ml_collections.ConfigDict({"hopper": 131_072})
        c.num_chunks = 8
        c.throughput.update(task="hopper", batch_sizes=(1, 8, 32, 64), horizon=32)
    elif arg == "full":
        c.tasks = ("pendulum", "cartpole", "reacher", "hopper")
        c.methods = ("rfo", "rfo_chunked", "rfo_none", "rfo_stability", "rfo_exploration",
                     "shac_gaussian", "apg", "ppo")
        c.task_methods = ml_collections.ConfigDict()
        c.num_seeds = 8
        c.env_steps = 1_048_576
        c.task_env_steps = ml_collections.ConfigDict({"hopper": 4_194_304})
        c.num_chunks = 16
        c.common.update(num_envs=256, eval_horizon=256, episode_length=256)
        c.throughput.update(task="hopper", batch_sizes=(1, 64, 1024, 4096))
    elif arg in ("soft_smoke", "soft_study"):
        c.tasks = ("soft_quadruped",)
        c.methods = ("rfo", "rfo_none", "shac_gaussian", "apg", "ppo")
        c.task_methods = ml_collections.ConfigDict()
        c.task_env_steps = ml_collections.ConfigDict()
        c.throughput.task = ""
        if arg == "soft_smoke":
            c.num_seeds = 2
            c.env_steps = 4 * 8 * 8
            c.num_chunks = 2
            c.eval_every = 2
            c.common.update(num_envs=4, horizon=8, eval_horizon=16, episode_length=16,
                            hidden=16)
            c.rfo.buffer_size = 256
        else:
            c.num_seeds = 5
            c.seed = 4242
            c.env_steps = 98_304
            c.num_chunks = 8
            c.common.update(num_envs=32, horizon=32, eval_horizon=128, episode_length=128)
    elif arg == "soft_gait_smoke":
        c.tasks = ("soft_quadruped_gait",)
        c.methods = ("rfo", "shac_gaussian", "apg", "ppo")
        c.task_methods = ml_collections.ConfigDict()
        c.task_env_steps = ml_collections.ConfigDict()
        c.throughput.task = ""
        c.num_seeds = 2
        c.env_steps = 4 * 32 * 2
        c.num_chunks = 2
        c.eval_every = 1
        c.common.update(num_envs=4, horizon=32, eval_horizon=128, episode_length=128,
                        hidden=16)
        c.rfo.buffer_size = 256
        c.deterministic_eval = True
        c.keep_policies = True
    elif arg == "quick":
        c.methods = QUICK_METHODS
    else:
        raise ValueError("config arg must be smoke, quick, cpu_ablation, cpu_long, full, "
                         f"soft_smoke, soft_study or soft_gait_smoke, got {arg!r}.")
    return c


# The quick preset's contenders: RFO, the rival of its declared ratio and the strongest
# baseline on pendulum.
QUICK_METHODS = ("rfo", "shac_gaussian", "ppo")


def validate_config(config: ml_collections.ConfigDict) -> None:
    """Checks a config of this module before any work is done (the study's first step).

    Every numeric field gets a range check; task names are ``rfo.task_names()``, method
    names ``rfo.CONTENDERS``; ``num_seeds`` >= 2 because the summary computes confidence
    intervals.

    Raises:
      ValueError: naming ``config.<field>``, the allowed range and the value.
    """
    from jaxlab.core import validation  # imported here: reading a config imports no JAX
    from jaxlab.rfo import CONTENDERS, envs
    from jaxlab.rfo.train import check_finite_fields

    for t in config.tasks:
        validation.check_one_of("config.tasks", t, envs.task_names())
    for t in config.get("task_methods", {}):
        validation.check_one_of("config.task_methods", t, envs.task_names())
    for t in config.get("task_env_steps", {}):
        validation.check_one_of("config.task_env_steps", t, envs.task_names())
        validation.check_positive_int(f"config.task_env_steps.{t}", config.task_env_steps[t])
    validation.check_min_count("config.num_seeds", config.num_seeds, 2,
                               "the summary computes 95% confidence intervals over seeds")
    pint, pos, nonneg = validation.POSITIVE_INT, validation.POSITIVE, validation.NON_NEGATIVE
    validation.check_fields(config, {
        "env_steps": pint, "num_chunks": pint,
        "common.num_envs": pint, "common.horizon": pint, "common.hidden": pint,
        "common.eval_horizon": pint, "common.lr": pos, "common.gamma": (0.0, 1.0, False, True),
        "rfo.chunk": pint, "rfo.ode_steps": pint, "rfo.stability_coef": nonneg,
        "rfo.exploration_coef": nonneg, "rfo.buffer_size": pint, "apg.lr": pos,
        "apg.lr_decay": (0.0, 1.0, False, True), "apg.grad_clip": pos,
        "ppo.epochs": pint, "ppo.minibatches": pint,
        "ppo.lr": pos,
    })
    validation.check_positive_int("config.eval_every", config.get("eval_every", 1))
    limit = config.get("max_nonfinite_grad_share")
    if limit is not None:
        validation.check_in_range("config.max_nonfinite_grad_share", limit, 0.0, 1.0)
    for name in ("common.lr", "ppo.lr", "rfo.stability_coef", "rfo.exploration_coef",
                 "apg.lr", "apg.grad_clip"):
        group, field = name.split(".")
        if group in config and field in config[group]:
            check_finite_fields(config[group], (field,), f"config.{group}")
    c = config.common
    if c.episode_length < 0 or c.episode_length % c.horizon:
        raise ValueError(f"`config.common.episode_length`={c.episode_length} must be 0 or a "
                         f"positive multiple of `config.common.horizon`={c.horizon}.")
    steps_per_update = c.num_envs * c.horizon
    budgets = [config.env_steps, *config.get("task_env_steps", {}).values()]
    if min(budgets) < steps_per_update:
        raise ValueError(f"`config.env_steps` (and each `config.task_env_steps`) must be >= "
                         f"num_envs * horizon = {steps_per_update} (one update), got "
                         f"{min(budgets)}.")
    tp = config.get("throughput")
    if tp is not None and tp.task:
        validation.check_one_of("config.throughput.task", tp.task, envs.task_names())
        validation.check_positive_int("config.throughput.horizon", tp.horizon)
        for b in tp.batch_sizes:
            validation.check_positive_int("config.throughput.batch_sizes", b)
    task_methods = config.get("task_methods", {})
    for m in {*config.methods, *(m for ms in task_methods.values() for m in ms)}:
        if m not in CONTENDERS:
            raise ValueError(f"unknown method {m!r} in `config.methods`; choose from "
                             f"{CONTENDERS}.")
