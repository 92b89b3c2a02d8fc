"""Check: our PPO (``jaxlab.rfo.ppo``) against brax's PPO
(``brax.training.agents.ppo.train``) on one small run: the same environment, settings and
env-step budget, several seeds, the same evaluation.

brax 0.14.2's trainer needs the removed ``jax.device_put_replicated``: the stand-in of
``experiments.lib.brax_compat`` is installed for the brax runs only. Both PPOs train on our
``envs.make_task(--task)`` (default pendulum): ours directly, brax's through
``brax_compat.task_env`` (a brax ``Env`` calling ``envs.reset`` / ``envs.step`` with the
action clipped to [-1, 1], as our PPO does), wrapped by brax's own training wrappers
(episode length, auto-reset).

Matched settings (``SETTINGS``; every one that differs is in ``DIFFERENCES``): 16 envs, 32-step
unrolls (brax: batch_size 4 x num_minibatches 4 = 16 unrolls per update, one per env), 4
epochs x 4 minibatches, Adam lr 3e-4, global-norm clip 0.5, gamma 0.99, GAE lambda 0.95,
clip 0.2, entropy cost 0, value-loss weight 0.5 (brax's loss halves its coefficient: 1.0),
reward scale 0.1, per-minibatch advantage normalisation, episode length 128, no
observation normalisation, networks: separate policy and value MLPs 2 x 64 tanh, LeCun-normal
kernels, zero biases, mean layer N(0, 0.01^2), state-independent log-std initialised at -0.5,
Gaussian actions (no tanh squashing), log-probabilities of the unclipped action.

Evaluation (the same for both, ``evaluate``): each policy from the same ``--eval_envs`` reset
states (one fixed key) for ``--eval_horizon`` steps of our task, the return summed (stopping at
a termination), with the mean action (deterministic) and with sampled actions (stochastic,
the same noise key for both). Learning curves: the same evaluation of the parameters at
``--points`` equally spaced env-step counts (brax: its ``policy_params_fn`` after each of
``num_evals - 1`` training epochs, with ``run_evals=False``; ours: the same update counts).

Verdict, declared before running: the primary metric is the final stochastic eval return
(both trainers' own evaluation is stochastic), mean over seeds. "comparable" iff our mean is
at least brax's mean minus 10% of brax's improvement over its initial policy (ours better
passes); "inconclusive" if brax does not improve. The Welch 95% interval of the difference
is reported beside it (3 seeds: wide).

  python -m experiments.check_ppo_vs_brax [--env_steps=131072] [--seeds=3] \
      [--out=results/check_ppo_vs_brax.json]
"""

import functools
import math
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags
from flax import nnx

from jaxlab.rfo import envs, ppo
from jaxlab.rfo.train import network

from .lib import brax_compat, results
from .lib import provenance as prov

FLAGS = flags.FLAGS


def define_flags() -> None:
    """The command-line flags (defined only when run as a script, so that importing this
    module for its functions defines none)."""
    flags.DEFINE_string("out", "results/check_ppo_vs_brax.json", "JSON output path.")
    flags.DEFINE_string("task", "pendulum", "Task (make_task name).")
    flags.DEFINE_integer("env_steps", 131_072, "Env-step budget per run.")
    flags.DEFINE_integer("seeds", 3, "Seeds per PPO.")
    flags.DEFINE_integer("points", 8, "Learning-curve points after step 0.")
    flags.DEFINE_integer("eval_envs", 128, "Evaluation reset states.")
    flags.DEFINE_integer("eval_horizon", 128, "Evaluation steps.")


MATCH = dict(num_envs=16, rollout_len=32, epochs=4, minibatches=4, lr=3e-4, grad_clip=0.5,
             gamma=0.99, gae_lambda=0.95, clip_eps=0.2, vf_coef=0.5, ent_coef=0.0, hidden=64,
             episode_length=128, reward_scale=0.1, init_log_std=-0.5)

DIFFERENCES = (
    "policy-gradient advantage: ours GAE A_t = d_t + gamma*lambda*A_{t+1}; brax (compute_gae) "
    "r_t + gamma*v^lambda_{t+1} - V(s_t) = d_t + gamma*A_{t+1} (lambda only enters through the "
    "value target); both value targets are the GAE lambda-return",
    "advantages/targets: ours computed once per update with the rollout-time value network; "
    "brax recomputes them inside every minibatch loss with the current value network",
    "minibatches: ours shuffle individual transitions (4 x 128); brax shuffles whole 32-step "
    "trajectories (4 x 4 trajectories = 128 transitions)",
    "time limit: ours resets finished episodes between updates and bootstraps V(s_128) on the "
    "last transition; brax marks step 128 as truncation (its delta and advantage are zeroed, "
    "no bootstrap) and auto-resets inside the unroll (episodes align with unrolls here)",
    "value loss written 0.5*c*mean((vs-V)^2) in brax vs c*mean((V-G)^2) in ours: brax "
    "vf_loss_coefficient=1.0 matches our vf_coef=0.5",
    "random streams: initial weights, env resets and action noise come from each library's own "
    "key schedule (ours jax.random.key(seed), brax PRNGKey(seed)); seeds are not paired",
    "in-training evaluation: ours eval_horizon=1 (its own per-update evaluation is not used, "
    "only to save time); brax run_evals=False; both evaluated afterwards by `evaluate`",
)


def our_config(env_steps: int) -> ppo.PPOConfig:
    m = MATCH
    per_update = m["num_envs"] * m["rollout_len"]
    return ppo.PPOConfig(num_envs=m["num_envs"], rollout_len=m["rollout_len"],
                         num_updates=max(env_steps // per_update, 1), epochs=m["epochs"],
                         minibatches=m["minibatches"], lr=m["lr"], grad_clip=m["grad_clip"],
                         gamma=m["gamma"], gae_lambda=m["gae_lambda"], clip_eps=m["clip_eps"],
                         vf_coef=m["vf_coef"], ent_coef=m["ent_coef"], hidden=m["hidden"],
                         episode_length=m["episode_length"], eval_horizon=1,
                         reward_scale=m["reward_scale"])


def brax_network_factory():
    """brax's ``make_ppo_networks`` configured like our ``ActorCritic``."""
    from brax.training.agents.ppo import networks as ppo_networks

    return functools.partial(
        ppo_networks.make_ppo_networks,
        policy_hidden_layer_sizes=(MATCH["hidden"],) * 2,
        value_hidden_layer_sizes=(MATCH["hidden"],) * 2, activation=jnp.tanh,
        distribution_type="normal", noise_std_type="log",
        init_noise_std=math.exp(MATCH["init_log_std"]),
        policy_network_kernel_init_fn=jax.nn.initializers.lecun_normal,
        value_network_kernel_init_fn=jax.nn.initializers.lecun_normal,
        mean_kernel_init_fn=jax.nn.initializers.normal, mean_kernel_init_kwargs={"stddev": 1e-2})


def brax_kwargs(env_steps: int, points: int) -> dict:
    """Keyword arguments of ``brax.training.agents.ppo.train`` matching ``our_config``."""
    m = MATCH
    return dict(num_timesteps=env_steps, num_envs=m["num_envs"],
                episode_length=m["episode_length"], unroll_length=m["rollout_len"],
                batch_size=m["num_envs"] // m["minibatches"], num_minibatches=m["minibatches"],
                num_updates_per_batch=m["epochs"], learning_rate=m["lr"],
                entropy_cost=m["ent_coef"], discounting=m["gamma"], gae_lambda=m["gae_lambda"],
                clipping_epsilon=m["clip_eps"], max_grad_norm=m["grad_clip"],
                reward_scaling=m["reward_scale"], vf_loss_coefficient=2 * m["vf_coef"],
                normalize_advantage=True, normalize_observations=False, action_repeat=1,
                num_evals=points + 1, run_evals=False, network_factory=brax_network_factory())


SETTINGS = {  # name: (ours, brax)
    "envs": ("num_envs=16", "num_envs=16"),
    "unroll": ("rollout_len=32", "unroll_length=32"),
    "env steps per update": ("16 x 32 = 512", "batch_size 4 x num_minibatches 4 x 32 = 512"),
    "epochs x minibatches": ("4 x 4", "num_updates_per_batch 4 x num_minibatches 4"),
    "optimizer": ("clip_by_global_norm(0.5) + adam(3e-4)", "max_grad_norm 0.5, adam(3e-4)"),
    "discount / GAE lambda": ("0.99 / 0.95", "0.99 / 0.95"),
    "clip": ("clip_eps 0.2", "clipping_epsilon 0.2"),
    "entropy": ("ent_coef 0", "entropy_cost 0"),
    "value loss": ("vf_coef 0.5 * mean sq", "vf_loss_coefficient 1.0 * 0.5 * mean sq"),
    "reward scale": ("0.1 (inside GAE)", "reward_scaling 0.1"),
    "advantage normalisation": ("per minibatch", "per minibatch"),
    "episode length": ("128", "128 (EpisodeWrapper)"),
    "networks": ("2x64 tanh actor, 2x64 tanh critic", "(64, 64) tanh policy, (64, 64) value"),
    "action distribution": ("Gaussian, log_std param init -0.5, env clips to [-1, 1]",
                            "normal, noise_std_type log, init_noise_std exp(-0.5); env "
                            "wrapper clips to [-1, 1]"),
    "observation normalisation": ("none", "normalize_observations False"),
}


def evaluate(task: envs.Task, act, n_envs: int, horizon: int, key):
    """jit(params) -> (deterministic returns [E], stochastic returns [E]).

    ``act(params, obs [E, O], key, deterministic) -> actions [E, A]`` (clipped to [-1, 1]
    here); every policy sees the same ``n_envs`` reset states and, stochastic, the same keys.
    """
    k_reset, k_act = jax.random.split(key)
    step = jax.vmap(lambda s, a: envs.step(task, s, a))

    def returns(params, deterministic):
        s0 = jax.vmap(lambda k: envs.reset(k, task))(jax.random.split(k_reset, n_envs))

        def body(carry, k):
            s, alive = carry
            a = act(params, s.obs, k, deterministic)
            s1, r = step(s, jnp.clip(a, -1.0, 1.0))
            return (s1, alive * (1.0 - s1.done)), r * alive

        _, r = jax.lax.scan(body, (s0, jnp.ones(n_envs)), jax.random.split(k_act, horizon))
        return jnp.sum(r, 0)

    return jax.jit(lambda p: (returns(p, True), returns(p, False)))


def our_act(task: envs.Task, cfg: ppo.PPOConfig):
    graphdef, _ = network(lambda rngs: ppo.ActorCritic(task.obs_dim, task.act_dim, cfg.hidden,
                                                       rngs=rngs))

    def act(params, obs, key, deterministic):
        mean, log_std, _ = nnx.merge(graphdef, params)(obs)
        if deterministic:
            return mean
        return mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)

    return act


def brax_act(task: envs.Task):
    from brax.training.agents.ppo import networks as ppo_networks

    make_policy = ppo_networks.make_inference_fn(
        brax_network_factory()(task.obs_dim, task.act_dim))

    def act(params, obs, key, deterministic):
        return make_policy(params, deterministic=deterministic)(obs, key)[0]

    return act


def run_ours(task: envs.Task, env_steps: int, seeds: int, points: int, ev) -> dict:
    """Our PPO, ``seeds`` runs vmapped; params evaluated at ``points`` + 1 step counts."""
    cfg = our_config(env_steps)
    if cfg.num_updates % points:
        raise ValueError(f"{cfg.num_updates} updates must divide into {points} points.")
    per_chunk = cfg.num_updates // points
    trainer = ppo.make_trainer(task, cfg)

    @jax.jit
    def chunk(state, key, start):
        def body(s, u):
            return trainer.step(jax.random.fold_in(key, u), s)

        return jax.lax.scan(body, state, start + jnp.arange(per_chunk))

    t0 = time.perf_counter()
    keys = jax.vmap(jax.random.split)(jax.vmap(jax.random.key)(jnp.arange(seeds)))
    state = jax.vmap(trainer.init)(keys[:, 0])
    v_chunk = jax.vmap(chunk, in_axes=(0, 0, None))
    v_eval = jax.vmap(ev)
    curve, steps, train_r = [], [], []
    for p in range(points + 1):
        if p:
            state, info = v_chunk(state, keys[:, 1], jnp.int32((p - 1) * per_chunk))
            train_r.append(np.asarray(info.train_return).mean(1).tolist())
        det, sto = v_eval(state.params)
        curve.append({"deterministic": np.asarray(det).mean(1).tolist(),
                      "stochastic": np.asarray(sto).mean(1).tolist()})
        steps.append(p * per_chunk * cfg.num_envs * cfg.rollout_len)
    return {"steps": steps, "curve": curve, "train_reward_per_step": train_r,
            "wall_s": time.perf_counter() - t0, "config": cfg._asdict()}


def run_brax(env, env_steps: int, seeds: int, points: int, ev) -> dict:
    """brax PPO, one run per seed; params evaluated after each training epoch."""
    from brax.training.agents.ppo import train as brax_ppo

    kwargs = brax_kwargs(env_steps, points)
    t0 = time.perf_counter()
    per_seed, steps = [], None
    with brax_compat.installed():
        for seed in range(seeds):
            got = []
            brax_ppo.train(env, seed=seed, **kwargs,
                           policy_params_fn=lambda s, _mp, p, got=got: got.append((s, p)))
            steps = [int(s) for s, _ in got]
            per_seed.append([tuple(np.asarray(x) for x in ev(p)) for _, p in got])
    curve = [{"deterministic": [float(s[i][0].mean()) for s in per_seed],
              "stochastic": [float(s[i][1].mean()) for s in per_seed]}
             for i in range(len(steps))]
    kw = {k: v for k, v in kwargs.items() if k != "network_factory"}
    return {"steps": steps, "curve": curve, "wall_s": time.perf_counter() - t0,
            "config": kw}


def _mean_spread(x) -> dict:
    x = np.asarray(x, float)
    return {"mean": float(x.mean()), "std": float(x.std(ddof=1)) if x.size > 1 else 0.0,
            "min": float(x.min()), "max": float(x.max()), "values": x.tolist()}


def welch(a, b) -> dict:
    """mean(a) - mean(b) and its Welch 95% interval."""
    from scipy import stats

    a, b = np.asarray(a, float), np.asarray(b, float)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1)) if se else 1.0
    h = stats.t.ppf(0.975, df) * se
    d = float(a.mean() - b.mean())
    return {"diff": d, "ci95": [d - h, d + h], "df": float(df)}


def verdict(ours: dict, brax: dict) -> dict:
    o = np.asarray(ours["curve"][-1]["stochastic"])
    b = np.asarray(brax["curve"][-1]["stochastic"])
    b0 = np.asarray(brax["curve"][0]["stochastic"])
    improvement = float(b.mean() - b0.mean())
    gap = float(b.mean() - o.mean())
    if improvement <= 0:
        decision = "inconclusive (brax PPO did not improve over its initial policy)"
    elif gap <= 0.1 * improvement:
        decision = "PASS: our PPO reaches a return comparable to brax PPO at equal env steps"
    else:
        decision = "FAIL: our PPO stays below brax PPO at equal env steps"
    return {"metric": "final stochastic eval return, mean over seeds", "ours": float(o.mean()),
            "brax": float(b.mean()), "brax_improvement": improvement, "gap_brax_minus_ours": gap,
            "tolerance": 0.1 * improvement, "welch_ours_minus_brax": welch(o, b),
            "decision": decision}


def format_table(result: dict) -> str:
    o, b = result["ours"], result["brax"]
    lines = [f"task {result['task']}, {result['env_steps']} env steps per run, "
             f"{result['seeds']} seeds each; eval: {result['eval_envs']} reset states x "
             f"{result['eval_horizon']} steps (mean +- std over seeds of the mean return)"]
    head = (f"{'env steps':>9s} | {'ours det':>15s} | {'brax det':>15s} | {'ours stoch':>15s} |"
            f" {'brax stoch':>15s}")
    lines += [head, "-" * len(head)]
    fmt = lambda x: f"{np.mean(x):7.2f} +- {np.std(x, ddof=1):5.2f}"  # noqa: E731
    for i, s in enumerate(o["steps"]):
        bi = b["steps"].index(s) if s in b["steps"] else None
        bd = fmt(b["curve"][bi]["deterministic"]) if bi is not None else f"{'-':>15s}"
        bs = fmt(b["curve"][bi]["stochastic"]) if bi is not None else f"{'-':>15s}"
        lines.append(f"{s:9d} | {fmt(o['curve'][i]['deterministic'])} | {bd} | "
                     f"{fmt(o['curve'][i]['stochastic'])} | {bs}")
    fo, fb = o["final"], b["final"]
    lines += ["", "final, per seed:"]
    for kind in ("deterministic", "stochastic"):
        lines.append(f"  {kind:13s} ours {[round(x, 2) for x in fo[kind]['values']]}  "
                     f"brax {[round(x, 2) for x in fb[kind]['values']]}  "
                     f"(ours - brax: {fo[kind]['mean'] - fb[kind]['mean']:+.2f}, Welch 95% "
                     f"[{result['welch'][kind]['ci95'][0]:+.2f}, "
                     f"{result['welch'][kind]['ci95'][1]:+.2f}])")
    v = result["verdict"]
    lines += [f"wall: ours {o['wall_s']:.0f} s ({result['seeds']} seeds vmapped, incl. compile),"
              f" brax {b['wall_s']:.0f} s ({result['seeds']} sequential runs, incl. compiles)",
              f"verdict ({v['metric']}): ours {v['ours']:.2f}, brax {v['brax']:.2f}, gap "
              f"{v['gap_brax_minus_ours']:.2f} vs tolerance {v['tolerance']:.2f} (10% of brax's "
              f"improvement {v['brax_improvement']:.2f}) -> {v['decision']}"]
    return "\n".join(lines)


def run_check(task_name: str = "pendulum", env_steps: int = 131_072, seeds: int = 3,
              points: int = 8, eval_envs: int = 128, eval_horizon: int = 128) -> dict:
    """Both PPOs on ``task_name`` (module doc); a JSON-ready dict."""
    task = envs.make_task(task_name)
    key = jax.random.key(12345)
    cfg = our_config(env_steps)
    ev_ours = evaluate(task, our_act(task, cfg), eval_envs, eval_horizon, key)
    ev_brax = evaluate(task, brax_act(task), eval_envs, eval_horizon, key)
    ours = run_ours(task, env_steps, seeds, points, ev_ours)
    brax = run_brax(brax_compat.task_env(task), env_steps, seeds, points, ev_brax)
    for r in (ours, brax):
        r["final"] = {k: _mean_spread(r["curve"][-1][k]) for k in ("deterministic", "stochastic")}
    result = {"task": task_name, "env_steps": env_steps, "seeds": seeds, "points": points,
              "eval_envs": eval_envs, "eval_horizon": eval_horizon,
              "settings": {k: {"ours": v[0], "brax": v[1]} for k, v in SETTINGS.items()},
              "differences": list(DIFFERENCES), "ours": ours, "brax": brax}
    result["welch"] = {k: welch(ours["curve"][-1][k], brax["curve"][-1][k])
                       for k in ("deterministic", "stochastic")}
    result["verdict"] = verdict(ours, brax)
    return result


def main(argv):
    del argv
    t0 = time.perf_counter()
    result = run_check(FLAGS.task, FLAGS.env_steps, FLAGS.seeds, FLAGS.points,
                       FLAGS.eval_envs, FLAGS.eval_horizon)
    result["wall_s"] = time.perf_counter() - t0
    result["provenance"] = prov.environment()
    print(format_table(result))
    print(f"\nwall time {result['wall_s']:.0f} s")
    print(f"wrote {results.write_json(FLAGS.out, result)}")


if __name__ == "__main__":
    define_flags()
    app.run(main)
