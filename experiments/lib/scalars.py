"""Per-experiment scalar extractors: a unit's result -> TensorBoard series.

``EXTRACTORS[name](config, unit, result, workdir)`` returns ``{tag: (steps, values)}`` or
``{(run, tag): (steps, values)}`` (``experiments.lib.events.write_scalars``) for one unit
of experiment ``name``; ``study.run_units`` calls it (through ``extract``) when the unit's
result is computed or loaded, and the series land in ``<workdir>/tb/<unit>/[<run>/]``.
Series of one figure (schedules, strategies, decoders, learners) are separate runs with
the same tag, so TensorBoard overlays them in one chart.

What each method logs (the x axis is the TensorBoard step; values are means over seeds):

- qlearning: ``qlearning/q_error``, ``target_error``, ``outer_iter`` vs samples, one run
  per period schedule.
- bco: final regret vs the swept quantity (d, horizon T, switch period; an index for
  real-valued sweeps), one run per learner. (Units keep final regrets only.)
- avatar: ``avatar/mrr``, ``hits@k`` vs active round, picked / pool share of correct
  queries vs round, one run per strategy (and protocol); adjoint solve seconds and
  residual vs n.
- gepc: the score model's training loss per step (when trained), mean GEPC residual per
  diffusion timestep index of every image set.
- dllm: accuracy, NFE and Path LL vs particles, one run per decoder family; the
  denoiser's train / eval loss per step (shipped or trained history); POKE fit; tokens/s.
- rfo: ``rfo/eval_return`` and ``rfo/train_reward`` vs env steps (per update), rollout
  throughput vs batch size; also RFO's older ``runs/*.json`` (same fields).

An extractor that fails on an unexpected result logs a warning and logs nothing: metrics
never stop a run. ``config`` may be ``None`` (exporting old results without a summary):
series then carry index names.
"""

import json
import os
from collections.abc import Callable

import numpy as np
from absl import logging

Series = dict
Extractor = Callable[[object, str, object, str], Series]


def _get(config, field, default=None):
    if config is None:
        return default
    try:
        return config.get(field, default)
    except AttributeError:
        return getattr(config, field, default)


def _names(names, n, prefix):
    names = list(names) if names is not None else []
    return names if len(names) == n else [f"{prefix}_{i}" for i in range(n)]


def _steps(values, n):
    """Integer sweep values as steps; real-valued sweeps by their index."""
    try:
        v = np.asarray(values, np.float64).reshape(-1)
    except (TypeError, ValueError):
        return np.arange(n), True
    if v.size == n and np.all(v == np.round(v)):
        return v.astype(np.int64), False
    return np.arange(n), True


def _mean(x, axis=-1):
    return np.asarray(x, np.float64).mean(axis=axis)


# --------------------------------------------------------------------------- qlearning
def qlearning(config, unit, result, workdir):
    del workdir
    trace = result.get("trace") if isinstance(result, dict) else None
    if not trace:
        return {}
    q = np.asarray(trace["q_error"])  # [schedules, seeds, records]
    r = q.shape[-1]
    q = q.reshape(q.shape[0], -1, r)
    names = None
    if config is not None:
        try:
            from experiments.qlearning import build_schedules

            names = build_schedules(config, unit.rsplit("-", 1)[0])[0]
        except Exception as e:  # noqa: BLE001 - names only
            logging.info("qlearning scalars: schedule names unavailable (%s)", e)
    names = _names(names, q.shape[0], "schedule")
    samples = np.asarray(trace["samples"]).reshape(q.shape[0], -1, r)
    out = {}
    for i, name in enumerate(names):
        steps = samples[i, 0]
        for field in ("q_error", "target_error", "outer_iter"):
            if field in trace:
                vals = np.asarray(trace[field]).reshape(q.shape[0], -1, r)[i]
                out[(name, f"qlearning/{field}")] = (steps, _mean(vals, 0))
    return out


# --------------------------------------------------------------------------------- bco
def bco(config, unit, result, workdir):
    del workdir
    a = np.asarray(result, np.float64)
    try:
        from experiments import bco as exp

        two_point, dyn_rows, families = list(exp.TWO_POINT), list(exp.DYNAMIC_ROWS), list(
            exp.FAMILIES)
    except Exception:  # noqa: BLE001 - names only
        two_point, dyn_rows, families = None, None, None
    nval = int(_get(config, "num_val_seeds", 0) or 0)
    # unit: (row names, config field of the swept axis, tag)
    sweeps = {"vs_rounds": (two_point, "horizons", "bco/regret_vs_horizon_T"),
              "vs_variation": (two_point, "amplitudes", "bco/regret_vs_amplitude"),
              "variants": (("convex", "strongly convex", "universal"), "curvatures",
                           "bco/regret_vs_curvature"),
              "dynamic": (dyn_rows, "switch_periods", "bco/regret_vs_switch_period"),
              "one_point": (("ema hint", "no hint"), "one_point_drifts",
                            "bco/one_point_regret_vs_drift")}
    out = {}
    if unit in sweeps and a.ndim == 3:
        rows, field, tag = sweeps[unit]
        steps, is_index = _steps(_get(config, field), a.shape[1])
        tag += "_index" if is_index else ""
        for name, row in zip(_names(rows, a.shape[0], "learner"), a, strict=True):
            out[(name, tag)] = (steps, _mean(row))
    elif unit == "vs_dim" and a.ndim == 4:
        steps, _ = _steps(_get(config, "dims"), a.shape[1])
        for name, row in zip(_names(("ours (optimistic)", "plain OGD"), 2, "learner"), a,
                             strict=True):
            out[(name, "bco/regret_vs_dim_step_1_over_sqrt_d")] = (steps,
                                                                   _mean(row[:, -1, nval:]))
    elif unit == "families" and a.ndim == 5:
        steps, _ = _steps(_get(config, "family_dims"), a.shape[2])
        for fam, block in zip(_names(families, a.shape[0], "family"), a, strict=True):
            for name, row in zip(("ours (optimistic)", "plain OGD"), block, strict=True):
                out[(f"{fam} {name}", "bco/family_regret_vs_dim_step_1_over_sqrt_d")] = (
                    steps, _mean(row[:, -1, nval:]))
    return out


# ------------------------------------------------------------------------------ avatar
def avatar(config, unit, result, workdir):
    del workdir
    out = {}
    if unit == "scaling":
        a = np.asarray(result, np.float64)
        steps, _ = _steps(_get(config, "scaling_sizes"), a.shape[0])
        for j, (run, tag) in enumerate([("cg", "avatar/adjoint_seconds"),
                                        ("dense", "avatar/adjoint_seconds"),
                                        ("cg", "avatar/adjoint_relative_residual"),
                                        ("dense", "avatar/adjoint_relative_residual"),
                                        ("cholesky", "avatar/adjoint_seconds"),
                                        ("cholesky", "avatar/adjoint_relative_residual")]):
            if j < a.shape[1]:
                out[(run, tag)] = (steps, a[:, j])
        return out
    if not isinstance(result, dict) or "metrics" not in result:
        return {}
    try:
        from experiments.avatar import METRICS
    except Exception:  # noqa: BLE001 - names only
        METRICS = None
    m = np.asarray(result["metrics"], np.float64)  # [protocols, metrics, strategies, seeds, R+1]
    protocols = _names(_get(config, "protocols"), m.shape[0], "protocol")
    strategies = _names(_get(config, "strategies"), m.shape[2], "strategy")
    metric_names = _names(METRICS, m.shape[1], "metric")

    def run(p, s):
        return strategies[s] if len(protocols) == 1 else f"{strategies[s]} ({protocols[p]})"

    for p in range(m.shape[0]):
        for s in range(m.shape[2]):
            if strategies[s] in result.get("skipped", ()):  # not defined on this task
                continue
            for k, metric in enumerate(metric_names):
                out[(run(p, s), f"avatar/{metric}")] = (np.arange(m.shape[-1]),
                                                        _mean(m[p, k, s], 0))
            for field in ("picked", "pool"):
                if field in result:
                    v = np.asarray(result[field], np.float64)[p, s]
                    out[(run(p, s), f"avatar/{field}_already_correct")] = (
                        np.arange(v.shape[-1]), _mean(v, 0))
    return out


# -------------------------------------------------------------------------------- gepc
def gepc(config, unit, result, workdir):
    del config, workdir
    if not isinstance(result, dict):
        return {}
    if "losses" in result:
        return {"gepc/score_model_loss": np.asarray(result["losses"]).reshape(-1)}
    if "residuals" in result:
        r = np.asarray(result["residuals"], np.float64)  # [N, T, G]
        return {"gepc/mean_residual_vs_timestep_index": r.mean(axis=(0, 2))}
    return {}


# -------------------------------------------------------------------------------- dllm
def _dllm_history(config, unit, workdir):
    candidates = []
    try:
        from experiments import dllm_models

        shipped = dllm_models.shipped_path(config, unit) if config is not None else ""
        if shipped:
            candidates.append(shipped + "_history.json")
    except Exception:  # noqa: BLE001 - optional
        pass
    candidates.append(os.path.join(os.path.abspath(workdir), "models", f"{unit}_history.json"))
    for path in candidates:
        if os.path.exists(path):
            with open(path) as f:
                return json.load(f)
    return None


def dllm(config, unit, result, workdir):
    if not isinstance(result, dict):
        return {}
    out = {}
    if "decoders" in result:
        rows = result["decoders"]
        fams: dict[str, list] = {}
        for dname, row in rows.items():
            fams.setdefault(row.get("family", dname), []).append((dname, row))
        for fam, items in fams.items():
            parts = [int(r.get("particles", 1)) for _, r in items]
            distinct = len(set(parts)) == len(parts)
            groups = [(fam, items)] if distinct else [(d, [(d, r)]) for d, r in items]
            for run, its in groups:
                its = sorted(its, key=lambda dr: int(dr[1].get("particles", 1)))
                steps = np.array([int(r.get("particles", 1)) for _, r in its])
                for field in ("accuracy", "nfe", "path_ll"):
                    if all(field in r for _, r in its):
                        out[(run, f"dllm/{field}_vs_particles")] = (
                            steps, np.array([float(r[field]) for _, r in its]))
        for dname, row in rows.items():  # SMC health along the decode, per decoder
            if "ess_trace" in row:
                trace = np.asarray(row["ess_trace"], np.float64)
                out[(dname, "dllm/mean_ess_over_n_vs_step")] = (np.arange(len(trace)), trace)
        fit = result.get("poke_fit")
        if isinstance(fit, dict):
            for k in ("mse", "r2"):
                if k in fit:
                    out[f"dllm/poke_fit_{k}"] = np.array([float(fit[k])])
        hist = _dllm_history(config, unit, workdir)
        if hist and "step" in hist:
            for k in ("train_loss", "eval_loss"):
                if k in hist:
                    out[("denoiser", f"dllm/denoiser_{k}")] = (np.asarray(hist["step"]),
                                                               np.asarray(hist[k]))
    elif unit == "throughput":
        per = result["per_particles"]
        ns = sorted(per, key=int)
        for k in ("smc", "greedy_batched", "sampled_batched"):
            out[(k, "dllm/tokens_per_s_vs_particles")] = (
                np.array([int(n) for n in ns]),
                np.array([per[n]["tokens_per_s"][k] for n in ns]))
    elif unit == "sale" and isinstance(result.get("results"), dict):
        for name, r in result["results"].items():
            for k, v in r.items():
                out[(name, f"dllm/sale_{k}")] = np.array([float(v)])
    return out


# --------------------------------------------------------------------------------- rfo
def rfo(config, unit, result, workdir):
    del config, workdir
    if not isinstance(result, dict):
        return {}
    out = {}
    if "env_steps" in result:
        for field in ("eval_return", "train_reward"):
            # evaluations run every few updates: their own env-step axis when present
            key = "eval_env_steps" if field == "eval_return" and "eval_env_steps" in result \
                else "env_steps"
            steps = np.asarray(result[key]).reshape(-1)
            if field in result:
                v = np.asarray(result[field], np.float64)
                out[f"rfo/{field}"] = (steps, v.reshape(-1, steps.size).mean(0))
    elif isinstance(result.get("env_steps_per_s"), dict):
        by_backend = result["env_steps_per_s"]
        if by_backend and not isinstance(next(iter(by_backend.values())), dict):
            by_backend = {"mjx": {"forward": by_backend}}  # before session 11: MJX forward
        for backend, by_mode in by_backend.items():
            for mode, rates in by_mode.items():
                bs = sorted(rates, key=int)
                tag = "rfo/rollout_env_steps_per_s_vs_batch"
                out[(f"{backend}_{mode.replace('+', '_')}", tag)] = (
                    np.array([int(b) for b in bs]), np.array([rates[b] for b in bs]))
    return out


EXTRACTORS: dict[str, Extractor] = {"qlearning": qlearning, "bco": bco, "avatar": avatar,
                                    "gepc": gepc, "dllm": dllm, "rfo": rfo}


def extract(name: str, config, unit: str, result, workdir: str,
            extractor: Extractor | None = None) -> Series:
    """The series of one unit (``extractor`` or ``EXTRACTORS[name]``); ``{}`` if there is
    no extractor or it fails (a warning is logged)."""
    fn = extractor or EXTRACTORS.get(name)
    if fn is None:
        return {}
    try:
        return fn(config, unit, result, workdir) or {}
    except Exception as e:  # noqa: BLE001 - metrics never stop a run
        logging.warning("%s: no TensorBoard scalars for unit %s (%s: %s)", name, unit,
                        type(e).__name__, e)
        return {}
