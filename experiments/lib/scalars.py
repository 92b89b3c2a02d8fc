"""TensorBoard series of a unit's result: the plumbing and the helpers extractors share.

Each study declares its own extractor, ``study.Experiment.scalars(config, unit, result,
workdir)`` (``tb_scalars`` in ``experiments/<method>.py``), returning ``{tag: (steps,
values)}`` or ``{(run, tag): (steps, values)}`` (``experiments.lib.events.write_scalars``)
for one unit; ``study.run_units`` calls it (through ``extract``) when the unit's result is
computed or loaded, and the series land in ``<workdir>/tb/<unit>/[<run>/]``. This module
imports no method.
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

from collections.abc import Callable

import numpy as np
from absl import logging

from . import methods

Series = dict
Extractor = Callable[[object, str, object, str], Series]


def get_field(config, field, default=None):
    """``config.<field>`` of a ConfigDict / NamedTuple, ``default`` when absent or
    ``config`` is None."""
    if config is None:
        return default
    try:
        return config.get(field, default)
    except AttributeError:
        return getattr(config, field, default)


def run_names(names, n, prefix):
    """``names`` when it has ``n`` entries, else ``<prefix>_<i>``."""
    names = list(names) if names is not None else []
    return names if len(names) == n else [f"{prefix}_{i}" for i in range(n)]


def sweep_steps(values, n):
    """Integer sweep values as steps; real-valued sweeps by their index."""
    try:
        v = np.asarray(values, np.float64).reshape(-1)
    except (TypeError, ValueError):
        return np.arange(n), True
    if v.size == n and np.all(v == np.round(v)):
        return v.astype(np.int64), False
    return np.arange(n), True


def mean(x, axis=-1):
    """float64 mean along ``axis``."""
    return np.asarray(x, np.float64).mean(axis=axis)


# --------------------------------------------------------------------------- qlearning


# --------------------------------------------------------------------------------- bco


# ------------------------------------------------------------------------------ avatar


# -------------------------------------------------------------------------------- gepc


# -------------------------------------------------------------------------------- dllm


# --------------------------------------------------------------------------------- rfo


def extract(name: str, config, unit: str, result, workdir: str,
            extractor: Extractor | None = None) -> Series:
    """The series of one unit: ``extractor``, else the ``scalars`` of method ``name``'s
    ``study.Experiment`` (looked up by name in ``experiments.lib.methods``); ``{}`` if
    there is none or it fails (a warning is logged)."""
    if extractor is None and name not in methods.METHODS:
        return {}
    try:
        fn = extractor or methods.METHODS[name].experiment().scalars
        return {} if fn is None else (fn(config, unit, result, workdir) or {})
    except Exception as e:  # noqa: BLE001 - metrics never stop a run
        logging.warning("%s: no TensorBoard scalars for unit %s (%s: %s)", name, unit,
                        type(e).__name__, e)
        return {}
