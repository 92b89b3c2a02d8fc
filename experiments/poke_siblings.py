"""Does a POKE head trained on sibling particles rank particles better?

  python -m experiments.poke_siblings --config=experiments/configs/dllm.py:cpu_hard \
      --workdir=results/poke_siblings

The shipped POKE head (``poke.fit``, MSE on 4096 independent rollouts) predicts which
problems are hard, not which particle of a problem will do better: its mid-path ranking
of sibling particles matched Path LL alone (README, POKE-SMC). This binary trains two
more heads on *sibling* rollouts (``config.poke.rollouts / siblings`` fresh training
prompts, ``siblings`` proposal rollouts each; prompts from a key used nowhere else) and
compares the three on the held-out test problems of the study
(``dllm.item_keys(config, "test", n)``).

Declared before the first run, nothing tuned on the test problems:
  * heads: ``shipped`` (the study's head), ``sibling_mse`` (MSE on the sibling rollouts:
    same data, plain loss) and ``sibling`` (``poke.sibling_loss`` with weight
    ``SIBLING_WEIGHT`` = 10, fixed a priori); the hidden size, steps and learning rate of
    ``config.poke``; a batch of ``batch_size // siblings`` groups (the same rows per step).
  * measures, N = max(``config.particles``), T and resampling schedule = ``config
    .temperature`` / ``config.resample_schedule`` (pass the study's validation-tuned
    values): (1) within-problem ranking on mixed problems at 25 / 50 / 75 % of the path
    (``experiments.dllm._preconditions``: random, Path LL, Path LL + V for each head);
    (2) POKE-SMC accuracy with each head, paired bootstrap differences ``sibling -
    shipped`` and ``sibling - sibling_mse``.
Diagnostic added after the first run (an explanation, not a comparison): the median over
problems of the spread (std over the N particles) of L_t and of each head's V(s_t).
Writes ``<workdir>/summary.json`` (config, versions, git commit) and prints the table.
"""

import jax
import numpy as np
from absl import logging

from jaxlab.core import metrics
from jaxlab.dllm import comparison, poke

from . import common, dllm, dllm_models
from .lib import results

SIBLINGS = 8
SIBLING_WEIGHT = 10.0
HEADS = ("shipped", "sibling_mse", "sibling")


def _fit_sibling_heads(config, m) -> dict:
    """{"sibling_mse": (graphdef, params), "sibling": ...} fitted on sibling rollouts."""
    pc = config.poke
    prompts, _ = m.task.sample(jax.random.key(config.seed + 31_337), pc.rollouts // SIBLINGS)
    spec = dllm_models.default_proposal(config, m.task)  # the proposal the decoders use
    chunks = [poke.collect_sibling_rollouts(
        jax.random.key(31_337 + i), m.denoise_fn, prompts[i:i + 128], m.task.answer_len,
        siblings=SIBLINGS, mask_id=m.task.mask_id, **spec)
        for i in range(0, prompts.shape[0], 128)]
    ro = jax.tree.map(lambda *x: jax.numpy.concatenate(x), *chunks)
    out = {}
    for name, weight in (("sibling_mse", 0.0), ("sibling", SIBLING_WEIGHT)):
        graphdef, params, losses, val = poke.fit(
            ro, hidden=pc.hidden, steps=pc.steps, batch_size=max(1, pc.batch_size // SIBLINGS),
            lr=pc.lr, seed=config.seed, num_chunks=pc.num_chunks, siblings=SIBLINGS,
            sibling_weight=weight)
        logging.info("poke_siblings: %s head: train loss %.4f -> %.4f, best val %.4f", name,
                     losses[0], losses[-1], float(np.min(val)))
        out[name] = (graphdef, params)
    return out


def run(config, workdir: str) -> dict:
    """The declared study (module docstring) on every task of ``config.tasks``."""
    models = dllm_models.Models(config, workdir)
    n = max(config.particles)
    tuned = dllm.default_tuning(config)
    one_n = config.copy_and_resolve_references()  # the preconditions at N only
    one_n.particles = (n,)
    summary = {"config": config.to_dict(), "siblings": SIBLINGS,
               "sibling_weight": SIBLING_WEIGHT, "particles": n, "tuned": tuned, "tasks": {}}
    for name in config.tasks:
        m = models.denoiser(name)
        spec = dllm_models.default_proposal(config, m.task)
        heads = {"shipped": models.poke_head(name, proposal=spec),
                 **_fit_sibling_heads(config, m)}
        keys = dllm.item_keys(config, "test", config.num_problems)
        prompt, _ = comparison.item_problems(keys, m.task)
        ranking, runs = {}, {}
        for h, head in heads.items():
            value_fn = poke.make_value_fn(*head, m.task.prompt_len, m.task.mask_id)
            pre = dllm._preconditions(one_n, m.task, m.denoise_fn, value_fn, tuned, prompt,
                                      float("nan"), {f"smc_{n}": np.full(prompt.shape[0], n)})
            ranking[h] = pre[str(n)]["ranking_on_mixed"]
            dec = dllm.decoders(config, m.task, m.denoise_fn, value_fn, tuned,
                                particles=(n,))[f"poke_smc_{n}"]
            runs[h] = dllm._run_decoder(config, m.task, f"{name} poke_smc_{n} {h}", dec, keys)
            logging.info("poke_siblings: %s %s: POKE-SMC accuracy %.3f", name, h,
                         runs[h]["accuracy"])
        diffs = {}
        for a, b in (("sibling", "shipped"), ("sibling", "sibling_mse")):
            x, y = (np.asarray(runs[k]["_correct"], np.float32) for k in (a, b))
            _, lo, hi = metrics.bootstrap_ci(jax.random.key(config.seed),
                                             lambda x, y: jax.numpy.mean(x - y), (x, y),
                                             config.bootstrap)
            diffs[f"{a} - {b}"] = {"difference": float(np.mean(x - y)), "ci95": [lo, hi]}
        summary["tasks"][name] = {
            "test_problems": int(prompt.shape[0]),
            "ranking_on_mixed": {
                f: {"step": ranking["shipped"][f]["step"],
                    "random": ranking["shipped"][f]["random"],
                    "path_ll": ranking["shipped"][f]["path_ll"],
                    **{f"path_ll_plus_{h}": ranking[h][f]["path_ll_plus_poke"] for h in heads},
                    "median_sibling_std_path_ll": ranking["shipped"][f][
                        "median_sibling_std_path_ll"],
                    **{f"median_sibling_std_{h}": ranking[h][f]["median_sibling_std_poke"]
                       for h in heads}}
                for f in ranking["shipped"]},
            "poke_smc_accuracy": {h: runs[h]["accuracy"] for h in heads},
            "poke_smc_accuracy_ci": {h: runs[h]["accuracy_ci"] for h in heads},
            "paired_differences": diffs}
        _print(name, n, summary["tasks"][name])
    results.write_summary(workdir, summary, config)
    return summary


def _print(name: str, n: int, t: dict) -> None:
    print(f"\n{name}: N = {n}, {t['test_problems']} test problems")
    print("ranking on mixed problems (top-weighted particle correct):")
    print("  fraction  step  random  path_ll  " + "  ".join(f"+{h}" for h in HEADS))
    for f, r in t["ranking_on_mixed"].items():
        vals = [r["random"], r["path_ll"], *(r[f"path_ll_plus_{h}"] for h in HEADS)]
        print(f"  {f:>8}  {r['step']:>4}  " + "  ".join(
            "  n/a" if v is None else f"{v:.3f}" for v in vals))
    print("median over problems of the std over particles (L_t; V(s_t) per head):")
    for f, r in t["ranking_on_mixed"].items():
        print(f"  {f:>8}  L_t {r['median_sibling_std_path_ll']:.3f}  " + "  ".join(
            f"{h} {r[f'median_sibling_std_{h}']:.3f}" for h in HEADS))
    print("POKE-SMC accuracy: " + ", ".join(f"{h} {a:.3f}"
                                            for h, a in t["poke_smc_accuracy"].items()))
    for k, d in t["paired_differences"].items():
        print(f"  {k}: {100 * d['difference']:+.1f} [{100 * d['ci95'][0]:+.1f}, "
              f"{100 * d['ci95'][1]:+.1f}] pts")


if __name__ == "__main__":
    common.launch(run, "experiments/configs/dllm.py:cpu_hard")
