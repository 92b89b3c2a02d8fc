"""Benchmark: what N SMC particles cost against N greedy decodes batched the same way.

Per N in ``--particles`` (default: the preset's ``throughput_particles``), on ``--problems``
problems of ``--task`` (default: the preset's first task) with its shipped denoiser
(``experiments.dllm_models``), three contenders decode the same prompts:

* ``smc``: Path-LL SMC (``path_smc.smc_decode``, tokens at T = 1, ESS test every step) on
  the [B, P] prompts, N particles each;
* ``greedy_batched``: N greedy (confidence, T = 0) decodes batched the same way, i.e. one
  ``decoding.decode`` of the [B N, P] repeated prompts;
* ``sampled_batched``: the same with T = 1 sampling (SMC's proposal without the weights,
  the ESS or the resampling).

Every contender is jitted once per N and timed the same way
(``timing.times_interleaved``: one warm-up call each, then ``--repeats`` rounds of one call
each; best of the rounds, with their spread), so a load change on the shared machine hits
all of them alike. Printed per N: the seconds, ``smc / greedy`` (the cost of SMC over N
greedy decodes of the same batch), ``smc / sampled`` (the SMC bookkeeping alone),
tokens/s and ``batching efficiency`` (tokens/s at N over tokens/s at the smallest N, per
contender: when greedy falls as much as SMC, the larger batch, not SMC, is what costs).
The CPU and load average are printed with the ratios, and the JSON (``--out``) holds
every number with its provenance (config, code version, git state, packages, machine,
load averages before and after).

  python -m experiments.bench_poke [--preset=quick] [--particles=1,4,16] [--problems=64]
      [--repeats=3] [--out=results/bench_poke.json]

``--preset=full`` times the full study's first task (countdown_hard) at N = 1, 4, 16.
"""

import functools
import os

import jax
import jax.numpy as jnp
from absl import app, flags

from jaxlab.dllm import decoding, path_smc

from . import dllm_models
from .configs import dllm as dllm_configs
from .lib import compile_cache, provenance, results, timing

FLAGS = flags.FLAGS


def define_flags() -> None:
    """The command-line flags (defined only when run as a script, so that importing this
    module for its functions defines none)."""
    flags.DEFINE_string("preset", "quick", "Preset of experiments/configs/dllm.py.")
    flags.DEFINE_string("task", None, "Task (default: the preset's first).")
    flags.DEFINE_list("particles", None,
                      "N to time (default: the preset's throughput_particles).")
    flags.DEFINE_integer("problems", 64, "Problems (prompts) per decode.")
    flags.DEFINE_integer("repeats", 3, "Timed rounds (best of) after the warm-up.")
    flags.DEFINE_string("workdir", "results/dllm", "Where models trained by the study are "
                        "looked up (a preset without shipped weights).")
    flags.DEFINE_string("out", "results/bench_poke.json", "JSON output ('' = none).")


def measure(task, denoise_fn, particles, problems: int = 64, repeats: int = 3) -> dict:
    """Seconds (best of ``repeats``, with their spread), ratios and tokens/s of SMC,
    batched greedy and batched sampled decodes per N (module docstring).

    Args:
      task: a ``jaxlab.dllm.tasks`` task (prompts, answer length, mask id, vocabulary).
      denoise_fn: tokens [M, L] -> (logits [M, L, V], hidden [M, L, D]).
      particles: the N to time (positive ints).
      problems: B, the prompts per decode.
      repeats: timed rounds per contender.

    Returns:
      {"task", "problems", "steps", "repeats", "per_particles": {str(N): {"seconds",
      "spread_s", "tokens_per_s", "smc_over_greedy", "smc_over_sampled", "batch_rows",
      "batching_efficiency"}}}.
    """
    particles = tuple(int(n) for n in particles)
    if not particles or min(particles) < 1:
        raise ValueError(f"`particles` must be positive ints, got {particles!r}.")
    prompt, _ = task.sample(jax.random.key(1), problems)
    steps = task.answer_len
    kw = dict(gen_length=steps, mask_id=task.mask_id, vocab_size=task.vocab_size)
    out = {}
    for n in particles:
        smc_fn = jax.jit(functools.partial(path_smc.smc_decode, denoise_fn=denoise_fn,
                                           num_particles=n, **kw))
        greedy_fn = jax.jit(functools.partial(decoding.decode, denoise_fn=denoise_fn, **kw))
        sampled_fn = jax.jit(functools.partial(decoding.decode, denoise_fn=denoise_fn,
                                               temperature=1.0, **kw))
        rows = jnp.repeat(prompt, n, axis=0)
        times = timing.times_interleaved({
            "smc": functools.partial(smc_fn, jax.random.key(0), prompt=prompt),
            "greedy_batched": functools.partial(greedy_fn, jax.random.key(0), prompt=rows),
            "sampled_batched": functools.partial(sampled_fn, jax.random.key(0), prompt=rows)},
            repeats=repeats)
        spreads = {k: timing.spread(t) for k, t in times.items()}
        sec = {k: s["min"] for k, s in spreads.items()}
        tok = prompt.shape[0] * n * steps
        out[str(n)] = {"seconds": sec, "spread_s": spreads,
                       "tokens_per_s": {k: tok / v for k, v in sec.items()},
                       "smc_over_greedy": sec["smc"] / sec["greedy_batched"],
                       "smc_over_sampled": sec["smc"] / sec["sampled_batched"],
                       "batch_rows": int(rows.shape[0])}
    base = out[str(min(particles))]["tokens_per_s"]
    for v in out.values():
        v["batching_efficiency"] = {k: v["tokens_per_s"][k] / base[k] for k in base}
    return {"task": task.name, "problems": int(prompt.shape[0]), "steps": steps,
            "repeats": repeats, "per_particles": out}


def report_lines(res: dict) -> list[str]:
    """The printed table of ``measure``'s result, one line per N."""
    lines = [f"task {res['task']}, {res['problems']} problems, {res['steps']} steps; timing: "
             f"warm, best of {res['repeats']}, interleaved",
             f"{'N':>3} {'rows':>5} {'SMC s':>8} {'greedy s':>9} {'sampled s':>9} "
             f"{'SMC/greedy':>10} {'SMC/sampled':>11} {'tok/s SMC':>10} {'tok/s greedy':>12} "
             f"{'eff SMC':>7} {'eff greedy':>10} {'IQR/best SMC, greedy':>21}"]
    for n, v in sorted(res["per_particles"].items(), key=lambda kv: int(kv[0])):
        s, t, e, sp = v["seconds"], v["tokens_per_s"], v["batching_efficiency"], v["spread_s"]
        iqr = [100 * sp[c]["iqr"] / sp[c]["min"] for c in ("smc", "greedy_batched")]
        lines.append(
            f"{n:>3} {v['batch_rows']:>5} {s['smc']:>8.3f} {s['greedy_batched']:>9.3f} "
            f"{s['sampled_batched']:>9.3f} {v['smc_over_greedy']:>9.2f}x "
            f"{v['smc_over_sampled']:>10.2f}x {t['smc']:>10.0f} {t['greedy_batched']:>12.0f} "
            f"{e['smc']:>7.2f} {e['greedy_batched']:>10.2f} {iqr[0]:>9.0f}%, {iqr[1]:.0f}%")
    return lines


def main(argv):
    del argv
    compile_cache.enable()
    config = dllm_configs.get_config(FLAGS.preset)
    name = FLAGS.task or config.tasks[0]
    particles = FLAGS.particles or config.throughput_particles
    load_before = os.getloadavg()
    m = dllm_models.Models(config, FLAGS.workdir).denoiser(name)
    res = measure(m.task, m.denoise_fn, particles, FLAGS.problems, FLAGS.repeats)
    print(timing.machine_line())
    for line in report_lines(res):
        print(line)
    if FLAGS.out:
        res["provenance"] = provenance.benchmark(
            load_before, preset=FLAGS.preset, config=provenance.config_dict(config))
        print(f"wrote {results.write_json(FLAGS.out, res)}")


if __name__ == "__main__":
    define_flags()
    app.run(main)
