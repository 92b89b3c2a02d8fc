"""Does a learned P(correct | partial path) rank sibling particles better than Path LL?

  python -m experiments.correctness_probe \
      --config=experiments/configs/correctness_probe.py:countdown \
      --workdir=results/correctness_probe

Declared before the first run (sizes in ``config.correctness``):

* the proposal: the study's untuned one (``quick`` preset: path proposal, one block,
  position temperature 1, argmax tokens, greedy's path as particle 0), N =
  ``particles``; the POKE value from the shipped head trained on that proposal;
* training: ``train_problems`` problems from ``task.sample(key(seed +
  train_seed_offset))`` (a key no other binary uses; any problem equal to a validation
  problem is dropped), N particles each (``correctness.collect_rollouts``), the head
  fitted by BCE (``correctness.fit``: its own split by problem for early stopping);
* report, on the study's validation problems (``experiments.dllm.item_keys(config,
  "tuning", val_problems)``), fresh particles: Brier and reliability of P(correct |
  s_t) over every (particle, step) row and at each of ``fractions`` of the decode; the
  within-problem AUROC and top-1 on mixed problems at those steps and at the last pass
  (S - 1) of the correctness value, Path LL L_t, L_t + V_t (POKE's prediction of the final
  Path LL) and V_t alone; best-of-N accuracy on the same particles by the final Path LL
  and by the correctness value of the last pass (``"last_value"``); twisted SMC (beta =
  ``config.weight_scale``, beta_V = ``twist_scale``, ESS < N/2 at every step) selecting
  by Path LL and by ``"last_value"``. 95 % bootstrap CIs over problems (paired for the
  differences), ``config.bootstrap`` resamples.
* cost: NFE (denoiser passes) per problem, and the head's FLOPs per call beside a
  denoiser pass's (2 x parameters x tokens), plus their measured times on one batch.

Writes ``<workdir>/summary.json`` (with provenance) and the head (with its sha256
record) to ``<workdir>/models/<task>_correctness_<proposal hash>``.
"""

import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging

from jaxlab.core import metrics
from jaxlab.dllm import comparison, correctness, path_smc, poke, weights

from . import common, dllm, dllm_models
from .lib import artifacts, results


def _rollouts(key, m, prompt, cc, spec, greedy, value_fn):
    """Labelled rollouts of ``prompt`` in batches of ``cc.rollout_batch`` problems."""
    t = m.task
    parts = []
    for i in range(0, prompt.shape[0], cc.rollout_batch):
        parts.append(correctness.collect_rollouts(
            jax.random.fold_in(key, i), m.denoise_fn, prompt[i:i + cc.rollout_batch],
            t.answer_len, num_particles=cc.particles, mask_id=t.mask_id,
            verify_fn=lambda p, a: dllm_models.verify(t, p, a), value_fn=value_fn,
            proposal=spec["proposal"], temperature=spec["temperature"],
            position_temperature=spec["position_temperature"],
            block_length=spec["block_length"], greedy_reference=greedy))
    return jax.tree.map(lambda *x: np.concatenate([np.asarray(a) for a in x]), *parts)


def _ci(key, stat, samples, n) -> list[float]:
    value, lo, hi = metrics.bootstrap_ci(key, stat, samples, n)
    return [float(value), float(lo), float(hi)]


def _top1_rows(key, scores: dict, correct, steps, n_boot) -> dict:
    """Top-1 on mixed problems per score and step, with CIs and the paired difference of
    each score against Path LL."""
    out = {}
    for label, t in steps.items():
        hits = {}
        for name, sc in scores.items():
            hit, mixed = (np.asarray(a) for a in correctness.top1_on_mixed(sc[:, :, t],
                                                                            correct))
            hits[name] = hit[mixed].astype(np.float64)
        row = {"step": int(t), "mixed_problems": int(mixed.sum())}
        for name, h in hits.items():
            row[name] = {"top1_ci": _ci(key, np.mean, (h,), n_boot),
                         "auroc_within": float(correctness.auroc_within(
                             scores[name][:, :, t], correct))}
            if name != "path_ll":
                row[name]["minus_path_ll_ci"] = _ci(
                    key, lambda x, y: np.mean(x - y), (h, hits["path_ll"]), n_boot)
        out[label] = row
    return out


def _calibration(key, prob, correct, steps, cc, n_boot) -> dict:
    """Brier (CI over problems) and reliability bins, over all rows and per step."""
    p_, n_, s_ = prob.shape
    labels = np.broadcast_to(correct[..., None], prob.shape).astype(np.float64)
    se = (prob - labels) ** 2

    def rows(sel):
        per_problem = se[:, :, sel].reshape(p_, -1)
        brier = _ci(key, lambda a, c: np.sum(a) / np.sum(c),
                    (per_problem.sum(1), np.full(p_, per_problem.shape[1], np.float64)),
                    n_boot)
        rel = correctness.reliability(prob[:, :, sel].reshape(-1),
                                      labels[:, :, sel].reshape(-1), cc.num_bins)
        nan = lambda x: [None if np.isnan(v) else float(v) for v in np.asarray(x)]  # noqa: E731
        return {"brier_ci": brier,
                "base_rate_brier": float(np.mean(labels[:, :, sel]) * (
                    1 - np.mean(labels[:, :, sel]))),
                "reliability": {"counts": np.asarray(rel.counts).tolist(),
                                "mean_predicted": nan(rel.mean_predicted),
                                "observed_rate": nan(rel.observed_rate)}}

    out = {"all_steps": rows(slice(None))}
    for label, t in steps.items():
        out[label] = {"step": int(t), **rows(slice(t, t + 1))}
    return out


def _accuracy(key, correct_by: dict, n_boot) -> dict:
    out = {k: _ci(key, np.mean, (v.astype(np.float64),), n_boot) for k, v in correct_by.items()}
    base = correct_by["best_of_n_path_ll"].astype(np.float64)
    for k, v in correct_by.items():
        if k != "best_of_n_path_ll" and k != "pass_at_n":
            out[f"{k}_minus_best_of_n_path_ll"] = _ci(
                key, lambda x, y: np.mean(x - y), (v.astype(np.float64), base), n_boot)
    return out


def _time(fn, *args, repeats=5) -> float:
    jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    for _ in range(repeats):
        jax.block_until_ready(fn(*args))
    return (time.perf_counter() - t0) / repeats


def run(config, workdir: str) -> dict:
    """The declared probe (module docstring) on ``config.tasks[0]``."""
    cc, name = config.correctness, config.tasks[0]
    t_start = time.perf_counter()
    models = dllm_models.Models(config, workdir)
    m = models.denoiser(name)
    task = m.task
    tuned = dllm.default_tuning(config)
    spec = dllm_models.proposal_spec(config, task, tuned)
    greedy = bool(config.greedy_reference)
    poke_fn = poke.make_value_fn(*models.poke_head(name, proposal=spec), task.prompt_len,
                                 task.mask_id)
    val_prompt, _ = comparison.item_problems(dllm.item_keys(config, "tuning",
                                                            cc.val_problems), task)
    val_prompt = np.asarray(val_prompt)
    train_prompt, _ = dllm_models.sample(task, jax.random.key(config.seed
                                                              + cc.train_seed_offset),
                                         cc.train_problems)
    train_prompt = np.asarray(train_prompt)
    seen = {p.tobytes() for p in val_prompt}
    keep = np.array([p.tobytes() not in seen for p in train_prompt])
    train_prompt = train_prompt[keep]
    usable = train_prompt.shape[0] - train_prompt.shape[0] % cc.rollout_batch
    train_prompt = train_prompt[:usable]  # whole batches: one compiled shape
    logging.info("correctness_probe: %d training problems (%d equal to a validation problem "
                 "dropped), %d validation problems", usable, int((~keep).sum()),
                 val_prompt.shape[0])

    t0 = time.perf_counter()
    train_ro = _rollouts(jax.random.key(config.seed + cc.train_seed_offset + 1), m,
                         train_prompt, cc, spec, greedy, poke_fn)
    t_collect = time.perf_counter() - t0
    t0 = time.perf_counter()
    fit = correctness.fit(jax.random.key(config.seed + cc.train_seed_offset + 2), train_ro,
                          hidden=cc.hidden, depth=cc.depth, steps=cc.steps,
                          batch_size=cc.batch_size, lr=cc.lr, weight_decay=cc.weight_decay,
                          val_fraction=cc.val_fraction, eval_every=cc.eval_every,
                          patience=cc.patience)
    t_fit = time.perf_counter() - t0
    logging.info("correctness_probe: fit val BCE %.4f at step %d (%.0f s)",
                 float(fit.val_loss.min()), fit.best_step, t_fit)
    path = os.path.join(os.path.abspath(workdir), "models",
                        f"{name}_correctness_{dllm_models.spec_hash(spec)}")
    if not os.path.isdir(path):
        weights.save_correctness_head(path, fit.params, step=fit.best_step,
                                      record={"task": name, "proposal": spec})
        record = weights.read_record(path)
        results.write_json(os.path.join(path, weights.RECORD), {
            **record, **artifacts.stamp(path, {"task": name, "kind": "correctness_head",
                                               "head": record["head"], "proposal": spec})})

    t0 = time.perf_counter()
    val_ro = _rollouts(jax.random.key(config.seed + cc.train_seed_offset + 3), m,
                       val_prompt, cc, spec, greedy, poke_fn)
    t_val = time.perf_counter() - t0
    log_p = np.asarray(jax.nn.log_sigmoid(correctness.head_logits(
        fit.params, jnp.asarray(val_ro.features))), np.float64)
    correct = np.asarray(val_ro.correct)
    s = task.answer_len
    steps = {f"{f:g}": correctness.rank_step(f, s) for f in cc.fractions}
    steps["last"] = s - 1
    ll, v = np.asarray(val_ro.path_ll, np.float64), np.asarray(val_ro.value, np.float64)
    scores = {"correctness": log_p, "path_ll": ll, "path_ll_plus_poke": ll + v,
              "poke_only": v}
    key = jax.random.key(config.seed)
    ranking = _top1_rows(key, scores, correct, steps, config.bootstrap)
    calibration = _calibration(key, np.exp(log_p), correct, steps, cc, config.bootstrap)

    # Best-of-N (the validation particles) and twisted SMC (fresh runs), by two selectors.
    rows = np.arange(correct.shape[0])
    by = {"greedy": correct[:, 0] if greedy else None,
          "pass_at_n": correct.any(1),
          "best_of_n_path_ll": correct[rows, np.argmax(val_ro.final_path_ll, 1)],
          "best_of_n_last_value": correct[rows, np.argmax(log_p[:, :, -1], 1)]}
    twist = correctness.make_twist_fn(fit.params, task.prompt_len, task.mask_id)
    t0 = time.perf_counter()
    smc_correct = {"smc_twist_path_ll": [], "smc_twist_last_value": []}
    resampled = []
    run_smc = jax.jit(lambda p, k: path_smc.run_particles(
        k, m.denoise_fn, p, task.answer_len, mask_id=task.mask_id,
        vocab_size=task.vocab_size, num_particles=cc.particles, value_fn=twist,
        proposal=spec["proposal"], temperature=spec["temperature"],
        position_temperature=spec["position_temperature"], block_length=spec["block_length"],
        greedy_reference=greedy, weight_scale=float(config.weight_scale),
        twist_scale=float(cc.twist_scale), ess_threshold=float(config.ess_threshold),
        resample_schedule=config.resample_schedule))
    for i in range(0, val_prompt.shape[0], cc.rollout_batch):
        p = jnp.asarray(val_prompt[i:i + cc.rollout_batch])
        state, info = run_smc(p, jax.random.key(config.seed + cc.train_seed_offset + 4 + i))
        path_smc.raise_if_nonfinite(info)
        resampled.append(np.asarray(info.resampled).any(0))
        for sel in ("path_ll", "last_value"):
            res = path_smc.best_particle(state, s, sel)
            smc_correct[f"smc_twist_{sel}"].append(
                np.asarray(dllm_models.verify(task, p, res.answer)))
    t_smc = time.perf_counter() - t0
    by.update({k: np.concatenate(v) for k, v in smc_correct.items()})
    by = {k: v for k, v in by.items() if v is not None}
    accuracy = _accuracy(key, by, config.bootstrap)

    # Cost: NFE, and the head beside a denoiser pass (FLOPs; time on one batch).
    n_tok = task.prompt_len + task.answer_len
    den_params = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(m.params))
    batch = jnp.asarray(np.repeat(val_prompt[:cc.rollout_batch], cc.particles, 0))
    tokens = jnp.concatenate([batch, jnp.full((batch.shape[0], task.answer_len),
                                              task.mask_id, batch.dtype)], 1)
    hidden = m.denoise_fn(tokens)[1]
    cost = {"nfe_per_problem": s * cc.particles,
            "head_flops_per_call": correctness.head_flops(fit.params, task.answer_len),
            "denoiser_flops_per_pass_approx": 2 * den_params * n_tok,
            "denoiser_params": den_params,
            "seconds_per_batch": {"rows": int(batch.shape[0]),
                                  "denoiser": _time(m.denoise_fn, tokens),
                                  "twist": _time(jax.jit(twist), hidden, tokens)}}
    cost["head_over_denoiser_flops"] = (cost["head_flops_per_call"]
                                        / cost["denoiser_flops_per_pass_approx"])

    summary = {
        "task": name, "proposal": spec, "greedy_reference": greedy,
        "particles": cc.particles, "steps": s,
        "features": "mean final hidden state over masked answer positions, over unmasked "
                    "answer positions, fraction masked (2 d_model + 1)",
        "sizes": {"train_problems": int(train_prompt.shape[0]),
                  "train_dropped_equal_to_validation": int((~keep).sum()),
                  "train_rows": int(np.prod(train_ro.path_ll.shape)),
                  "fit_train_problems": len(fit.train_problems),
                  "fit_early_stop_problems": len(fit.val_problems),
                  "val_problems": int(val_prompt.shape[0])},
        "fit": {"best_step": fit.best_step, "evaluations": len(fit.val_loss),
                "train_bce": fit.train_loss.tolist(), "val_bce": fit.val_loss.tolist()},
        "train_correct_rate": float(np.mean(train_ro.correct)),
        "val_correct_rate": float(np.mean(correct)),
        "val_mixed_share": float(np.mean(correct.any(1) & ~correct.all(1))),
        "calibration": calibration, "ranking_on_mixed": ranking, "accuracy": accuracy,
        "smc_problems_resampled_share": float(np.mean(np.concatenate(resampled))),
        "cost": cost,
        "seconds": {"train_rollouts": t_collect, "fit": t_fit, "val_rollouts": t_val,
                    "smc": t_smc, "total": time.perf_counter() - t_start}}
    results.write_summary(workdir, summary, config)
    _print(summary)
    return summary


def _fmt(ci) -> str:
    return f"{ci[0]:.3f} [{ci[1]:.3f}, {ci[2]:.3f}]"


def _print(sm: dict) -> None:
    print(f"\n{sm['task']}: N = {sm['particles']}, sizes {sm['sizes']}")
    cal = sm["calibration"]
    print(f"Brier all rows {_fmt(cal['all_steps']['brier_ci'])} (base rate "
          f"{cal['all_steps']['base_rate_brier']:.3f})")
    for label, row in sm["ranking_on_mixed"].items():
        print(f"  {label:>5} step {row['step']:>2} ({row['mixed_problems']} mixed): Brier "
              f"{_fmt(cal[label]['brier_ci'])} (base {cal[label]['base_rate_brier']:.3f})")
        for k in ("correctness", "path_ll", "path_ll_plus_poke", "poke_only"):
            print(f"      {k:>18} top-1 {_fmt(row[k]['top1_ci'])} AUROC "
                  f"{row[k]['auroc_within']:.3f}")
    for k, ci in sm["accuracy"].items():
        print(f"  {k}: {_fmt(ci)}")
    print(f"  cost: {sm['cost']}")


if __name__ == "__main__":
    common.launch(run, "experiments/configs/correctness_probe.py:countdown")
