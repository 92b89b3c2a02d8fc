"""Validation of the dLLM experiment config (``experiments/configs/dllm.py``).

``validate_config(config)`` is the first call of the study (``experiments/dllm.py``): a bad
field fails in well under a second with a message naming ``config.<field>`` instead of
after training, or silently (a NaN temperature used to give a NaN-filled summary).

Checks: every numeric field against its range (``check_fields`` rules below, finiteness of
the float ones); ``config.num_problems`` >= 2 and ``config.bootstrap`` >= 2 (the accuracy
CIs are percentile bootstraps over problems; there is one seed per study, so no seed
minimum); ``config.particles`` / ``config.throughput_particles`` non-empty tuples of
positive ints; ``config.task_refs`` (name -> ``"package.module:attr"``, the user's tasks)
import and are registered (``tasks.register_refs``) before ``config.tasks``, non-empty known
task names whose ``config.task_kwargs`` build; ``config.decoders`` empty or known decoder
names / families (``decoder_selection``); per-task ``config.task_train`` overrides checked
like ``config.train``; ``steps``
divisible by ``num_chunks`` for training and the POKE head; ``config.sale.taus`` >= 0;
``config.sale.task`` empty or a known task (a warning when it is not one of
``config.tasks``: the SALE check is then skipped); the protocol: ``config.resample_schedule``
and every ``config.protocol.schedules`` entry in ``path_smc.SCHEDULES``,
``config.particle_blocks`` (and each ``config.protocol.particle_blocks``) in
``PARTICLE_BLOCKS``, ``config.proposal`` in ``decoding.PROPOSALS``, ``config.select`` (and
each ``config.protocol.selections``) in ``path_smc.SELECTIONS``, ``config.temperature``,
``position_temperature``, ``sr_smc_temperature``, ``weight_scale`` finite and >= 0,
``config.ess_threshold``, ``select_mix`` and ``policy_mix`` in [0, 1], ``config.twist_scale``
None or finite and >= 0, ``config.resampler`` in ``RESAMPLER_CHOICES``, ``config.policy``
in ``POLICY_CHOICES``, ``config.best_of_selections`` among "value" and "mix"; the grids
``config.protocol.temperatures``, ``position_temperatures``, ``weight_scales``,
``twist_scales`` finite and >= 0, ``ess_thresholds`` and ``select_mixes`` in [0, 1],
``resamplers``, ``policies``, ``value_selections`` from the same choices;
``config.protocol.rank_fractions`` in (0, 1).
"""

import warnings

import numpy as np

from jaxlab.core import validation as V
from jaxlab.dllm import decoding, path_smc
from jaxlab.dllm import tasks as tasks_lib

__all__ = ["GREEDY_DECODERS", "PARTICLE_FAMILIES", "all_decoders", "decoder_selection"]

PARTICLE_BLOCKS = ("coarse", "semi_ar", "one")

TRAIN_RULES = {"steps": V.POSITIVE_INT, "batch_size": V.POSITIVE_INT,
               "num_chunks": V.POSITIVE_INT, "lr": V.POSITIVE}

RULES = {
    "seed": V.NON_NEGATIVE,
    "model.d_model": V.POSITIVE_INT, "model.n_layers": V.POSITIVE_INT,
    "model.n_heads": V.POSITIVE_INT, "model.n_kv_heads": V.POSITIVE_INT,
    "model.mlp_hidden_size": V.POSITIVE_INT, "model.rope_theta": V.POSITIVE,
    "model.rms_norm_eps": V.NON_NEGATIVE, "model.sale_tau": V.NON_NEGATIVE,
    **{f"train.{k}": r for k, r in TRAIN_RULES.items()},
    "poke.hidden": V.POSITIVE_INT, "poke.rollouts": V.POSITIVE_INT,
    "poke.temperature": V.NON_NEGATIVE, "poke.steps": V.POSITIVE_INT,
    "poke.batch_size": V.POSITIVE_INT, "poke.lr": V.POSITIVE, "poke.num_chunks": V.POSITIVE_INT,
    "num_problems": V.POSITIVE_INT, "eval_batch": V.POSITIVE_INT,
    "temperature": V.NON_NEGATIVE, "threshold": V.UNIT_CLOSED, "bootstrap": V.POSITIVE_INT,
    "position_temperature": V.NON_NEGATIVE, "sr_smc_temperature": V.NON_NEGATIVE,
    "weight_scale": V.NON_NEGATIVE, "ess_threshold": V.UNIT_CLOSED,
    "select_mix": V.UNIT_CLOSED, "policy_mix": V.UNIT_CLOSED,
    "sale.num_problems": V.POSITIVE_INT, "sale.block_q": V.POSITIVE_INT,
    "sale.block_k": V.POSITIVE_INT, "sale.local": V.POSITIVE_INT, "sale.batch": V.POSITIVE_INT,
    "protocol.validation_problems": V.POSITIVE_INT, "protocol.min_headroom": V.UNIT_CLOSED,
    "protocol.max_greedy": V.UNIT_CLOSED,
}
FLOATS = ("model.rope_theta", "model.rms_norm_eps", "model.sale_tau", "train.lr",
          "poke.temperature", "poke.lr", "temperature", "threshold", "position_temperature",
          "sr_smc_temperature", "weight_scale", "ess_threshold", "select_mix", "policy_mix")


def _get(config, dotted):
    value = config
    for part in dotted.split("."):
        if part not in value:
            return None
        value = value[part]
    return value


def _check_int_tuple(name: str, values) -> None:
    if values is None:
        return
    if isinstance(values, int | np.integer):
        values = (values,)
    if len(tuple(values)) == 0:
        raise ValueError(f"`{name}` must list at least one particle count, got {values!r}.")
    for v in values:
        V.check_positive_int(name, v)


def _check_steps_chunks(prefix: str, section) -> None:
    steps, chunks = section.get("steps"), section.get("num_chunks")
    if steps is not None and chunks is not None and steps % chunks:
        raise ValueError(f"`{prefix}.steps`={steps} must be divisible by "
                         f"`{prefix}.num_chunks`={chunks}.")


GREEDY_DECODERS = (*decoding.POLICIES, "semi_ar", "threshold")
RESAMPLER_CHOICES = (*sorted(path_smc.RESAMPLERS), path_smc.DISTINCT)
POLICY_CHOICES = (*decoding.POLICIES, *decoding.HEAD_POLICIES)
PARTICLE_FAMILIES = ("best_of", "smc", "sr_smc", "poke_smc")


def all_decoders(particles) -> list[str]:
    """Every decoder of the study, in its order: the greedy ones, then per N in
    ``particles`` best-of-N, Path-LL SMC, SR-SMC and POKE-SMC (``<family>_<N>``).

    Raises:
      TypeError / ValueError: ``particles`` is not a sequence of positive integers.
    """
    if isinstance(particles, str) or not hasattr(particles, "__iter__"):
        raise TypeError(f"`particles` must be a sequence of particle counts N, got "
                        f"{particles!r}.")
    for n in particles:
        V.check_positive_int("particles", n)
    return [*GREEDY_DECODERS, *(f"{f}_{n}" for n in particles for f in PARTICLE_FAMILIES)]


def decoder_selection(decoders, particles) -> list[str]:
    """The study's decoders picked by ``config.decoders``, in the study's order.

    Args:
      decoders: names (``"confidence"``, ``"poke_smc_4"``) or particle families
        (``"poke_smc"``: every N); empty = every decoder.
      particles: ``config.particles``.

    Returns:
      The decoder names, a subsequence of ``all_decoders(particles)``.

    Raises:
      ValueError: an entry that is neither a decoder nor a family, naming
        ``config.decoders``.

    Example:
      >>> from jaxlab.dllm import config
      >>> config.decoder_selection(("confidence", "poke_smc"), (2, 4))
      ['confidence', 'poke_smc_2', 'poke_smc_4']
    """
    every = all_decoders(particles)
    if isinstance(decoders, str):
        decoders = (decoders,)
    wanted = tuple(decoders or ())
    if not wanted:
        return every
    for d in wanted:
        if d not in every and d not in PARTICLE_FAMILIES:
            raise ValueError(f"`config.decoders` entry {d!r} must be one of {every} or a family "
                             f"{list(PARTICLE_FAMILIES)}.")
    return [d for d in every
            if d in wanted or any(d == f"{f}_{d.rsplit('_', 1)[-1]}" for f in wanted
                                  if f in PARTICLE_FAMILIES)]


def validate_config(config) -> None:
    """Raises ValueError naming ``config.<field>`` for the first bad field (module docstring).

    Args:
      config: the ``ml_collections.ConfigDict`` of ``experiments/configs/dllm.py``.
    """
    V.check_fields(config, RULES)
    for field in FLOATS:
        value = _get(config, field)
        if value is not None:
            V.check_finite(f"config.{field}", value)
    if _get(config, "num_problems") is not None:
        V.check_min_count("config.num_problems", config.num_problems, 2,
                          "the bootstrap accuracy CI needs two problems")
    if _get(config, "bootstrap") is not None:
        V.check_min_count("config.bootstrap", config.bootstrap, 2,
                          "bootstrap resamples for a percentile CI")
    _check_int_tuple("config.particles", _get(config, "particles"))
    _check_int_tuple("config.throughput_particles", _get(config, "throughput_particles"))
    if tuple(_get(config, "protocol.tune_particles") or ()):
        _check_int_tuple("config.protocol.tune_particles", config.protocol.tune_particles)
    tasks_lib.register_refs(_get(config, "task_refs"))
    names = tuple(_get(config, "tasks") or ())
    if not names:
        raise ValueError("`config.tasks` must name at least one task.")
    for name in names:
        V.check_one_of("config.tasks", name, tasks_lib.TASKS)
        kwargs = dict((_get(config, "task_kwargs") or {}).get(name, {}))
        try:
            tasks_lib.make_task(name, **kwargs)
        except (TypeError, ValueError) as e:
            raise ValueError(f"`config.task_kwargs.{name}` is invalid: {e}") from e
    if _get(config, "decoders") is not None and _get(config, "particles") is not None:
        decoder_selection(config.decoders, config.particles)
    if _get(config, "train") is not None:
        _check_steps_chunks("config.train", config.train)
    for name, over in dict(_get(config, "task_train") or {}).items():
        V.check_one_of("config.task_train", name, tasks_lib.TASKS)
        merged = {**dict(_get(config, "train") or {}), **dict(over)}
        V.check_fields(merged, TRAIN_RULES, prefix=f"config.task_train.{name}")
        _check_steps_chunks(f"config.task_train.{name}", merged)
    if _get(config, "poke") is not None:
        _check_steps_chunks("config.poke", config.poke)
    choices = {"resample_schedule": path_smc.SCHEDULES, "particle_blocks": PARTICLE_BLOCKS,
               "proposal": decoding.PROPOSALS, "select": path_smc.SELECTIONS,
               "resampler": RESAMPLER_CHOICES, "policy": POLICY_CHOICES}
    for name, allowed in choices.items():
        value = _get(config, name)
        if value is not None:
            V.check_one_of(f"config.{name}", value, allowed)
    for name, allowed in (("schedules", path_smc.SCHEDULES),
                          ("particle_blocks", PARTICLE_BLOCKS),
                          ("selections", path_smc.SELECTIONS),
                          ("value_selections", path_smc.SELECTIONS),
                          ("resamplers", RESAMPLER_CHOICES),
                          ("policies", POLICY_CHOICES)):
        for value in tuple(_get(config, f"protocol.{name}") or ()):
            V.check_one_of(f"config.protocol.{name}", value, allowed)
    for name, high in (("temperatures", None), ("position_temperatures", None),
                       ("weight_scales", None), ("ess_thresholds", 1.0),
                       ("twist_scales", None), ("select_mixes", 1.0)):
        values = _get(config, f"protocol.{name}")
        if values is not None and len(tuple(values)):
            arr = np.asarray(tuple(values), np.float64)
            V.check_in_range(f"config.protocol.{name}", arr, 0.0, high)
            V.check_finite(f"config.protocol.{name}", arr)
    twist = _get(config, "twist_scale")
    if twist is not None:
        V.check_finite("config.twist_scale", twist)
        V.check_in_range("config.twist_scale", np.float64(twist), 0.0)
    for value in tuple(_get(config, "best_of_selections") or ()):
        V.check_one_of("config.best_of_selections", value, ("value", "mix"))
    fracs = _get(config, "protocol.rank_fractions")
    if fracs is not None:
        arr = np.asarray(tuple(fracs), np.float64)
        if arr.size == 0 or not np.all((arr > 0) & (arr < 1)):
            raise ValueError("`config.protocol.rank_fractions` must be a non-empty tuple of "
                             f"numbers in (0, 1), got {tuple(fracs)!r}.")
    taus = _get(config, "sale.taus")
    if taus is not None:
        V.check_in_range("config.sale.taus", np.asarray(tuple(taus), np.float64), 0.0)
        V.check_finite("config.sale.taus", np.asarray(tuple(taus), np.float64))
    sale_task = _get(config, "sale.task")
    if sale_task:
        V.check_one_of("config.sale.task", sale_task, tasks_lib.TASKS)
        if sale_task not in names:
            warnings.warn(f"`config.sale.task`={sale_task!r} is not in `config.tasks`; the "
                          "SALE attention check is skipped.", UserWarning, stacklevel=2)
