"""The denoisers and POKE heads of the POKE-SMC study: shipped, trained in a workdir, or
trained now.

Lookup (``jaxlab.dllm.weights`` loads and saves the folders): the shipped weights in
``config.pretrained_dir`` first (part of the code version), then ``<workdir>/models/<task>``,
used only if its ``trained_with.json`` holds ``model_key`` (task, architecture, training
settings, seed, the POKE settings for a head, and the code version). A model is trained
(resumable chunks in the caller's ``study.Context``, exported there) only when neither
folder holds weights; a folder whose weights do not fit (another task, kind or
architecture, another key: other training settings or code) raises, naming the folder and
the differing fields, and is never replaced by a new training: delete it (or use another
workdir) to train again.

A POKE head belongs to the proposal its rollouts came from (``proposal_spec``: proposal,
policy, token and position temperatures, blocks; the head learns the remaining Path LL
*of that proposal*). A head folder holds its spec in ``proposal.json`` (a shipped folder
without one is the token proposal of ``legacy_spec``); the lookup takes the first shipped
head ``<task>_poke*`` trained on the wanted spec, then
``<workdir>/models/<task>_poke_<spec hash>``, else trains one on that proposal.
``Models`` keeps what it loaded, so one run loads each task's models once.
``train_denoisers`` / ``train_poke_heads`` are experiments/dllm_train.py and poke_train.py.
"""

import functools
import json
import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from absl import logging

from jaxlab.dllm import config as config_lib
from jaxlab.dllm import decoding, poke, weights
from jaxlab.dllm import model as model_lib
from jaxlab.dllm import tasks as tasks_lib
from jaxlab.dllm import train as train_lib

from .lib import artifacts, provenance, results, study


class TaskModel(NamedTuple):
    """A task and its denoiser; ``denoise_fn`` is ``model.apply`` bound to ``params``, jitted."""

    task: Any
    graphdef: Any
    params: Any
    denoise_fn: Any


def make_task(config, name: str):
    """The task ``name`` with ``config.task_kwargs[name]``; ``config.task_refs`` (the user's
    tasks, ``"package.module:attr"``) are registered first."""
    tasks_lib.register_refs(config.get("task_refs"))
    return tasks_lib.make_task(name, **dict(config.task_kwargs.get(name, {})))


# Jitted ``sample`` / ``verify`` per task: called eagerly, a task's ops compile one small
# program each (and a ``lax.scan`` with a body defined inside the method, e.g. addition's
# carries, compiles again on every call). Bounded, keyed by the (frozen, hashable) task.
@functools.lru_cache(maxsize=64)
def _task_fns(task) -> tuple[Any, Any]:
    return jax.jit(task.sample, static_argnums=1), jax.jit(task.verify)


def _jitted(task, which: int):
    try:
        return _task_fns(task)[which]
    except TypeError:  # an unhashable user task: its own (eager) methods
        return (task.sample, task.verify)[which]


def sample(task, key, n: int):
    """``task.sample(key, n)``, compiled once per task and ``n``."""
    return _jitted(task, 0)(key, n)


def verify(task, prompt, answer):
    """``task.verify(prompt, answer)``, compiled once per task and shapes."""
    return _jitted(task, 1)(prompt, answer)


def model_config(config, task) -> model_lib.LLaDAConfig:
    return model_lib.LLaDAConfig(vocab_size=task.vocab_size, mask_token_id=task.mask_id,
                                 **dict(config.model))


def _train_kwargs(config, name: str) -> dict:
    return {**dict(config.train), **dict(config.get("task_train", {}).get(name, {}))}


def model_key(config, name: str, head: bool = False, proposal: dict | None = None) -> str:
    """Key of a model trained in a workdir: what determines it and the code version
    (``proposal``: a head's proposal spec)."""
    spec = {"task": name, "task_kwargs": dict(config.task_kwargs.get(name, {})),
            "model": dict(config.model), "train": _train_kwargs(config, name),
            "seed": config.seed}
    ref = dict(config.get("task_refs") or {}).get(name)
    if ref:  # a user's task: where it comes from is part of what determines the model
        spec["task_ref"] = ref
    if head:
        spec["poke"] = dict(config.poke)
        if proposal is not None:
            spec["proposal"] = proposal
    return provenance.unit_key(spec)


def weights_record(config, name: str, head: bool = False) -> dict:
    """What a weights folder of task ``name`` records as the ``config`` of its
    ``trained_with.json`` (``artifacts.stamp``, with its sha256) and what
    a lookup checks (``artifacts.restore_first``'s ``expected``): the task, what the
    weights are (denoiser or POKE head) and the architecture (``config.model``; a head also
    ``config.poke.hidden``). Same-shape weights of another task are refused by name."""
    record = {"task": name, "kind": "poke_head" if head else "denoiser",
              "model": {k: config.model[k] for k in sorted(config.model)}}
    if head:
        record["poke_hidden"] = int(config.poke.hidden)
    return record


def particle_block(config, task, rule: str | None = None) -> int:
    """Semi-AR block length of every particle decoder: ``rule`` (default
    ``config.particle_blocks``) "one" = the whole answer, "coarse" =
    ``decoding.coarse_block``, "semi_ar" = the ``semi_ar`` decoder's block."""
    rule = rule or config.get("particle_blocks", "one")
    if rule == "one":
        return task.answer_len
    if rule == "coarse":
        return decoding.coarse_block(task.answer_len)
    if rule == "semi_ar":
        return decoding.semi_ar_block(task.answer_len)
    raise ValueError(f"`config.particle_blocks` must be one of {config_lib.PARTICLE_BLOCKS}, "
                     f"got {rule!r}.")


def proposal_spec(config, task, tuned: dict) -> dict:
    """The particle decoders' proposal (what a POKE head is trained on): ``tuned`` holds
    ``particle_blocks``, ``temperature`` (token) and ``position_temperature``."""
    path = config.get("proposal", "tokens") == "path"
    return {"proposal": config.get("proposal", "tokens"), "policy": "confidence",
            "temperature": float(tuned["temperature"]),
            "position_temperature": float(tuned["position_temperature"]) if path else 0.0,
            "block_length": int(particle_block(config, task, tuned["particle_blocks"]))}


def legacy_spec(config, task) -> dict:
    """The proposal of a head folder without ``proposal.json``: tokens drawn at
    ``config.poke.temperature``, one block."""
    return {"proposal": "tokens", "policy": "confidence",
            "temperature": float(config.poke.temperature), "position_temperature": 0.0,
            "block_length": int(task.answer_len)}


def _spec_of(path: str, config, task) -> dict:
    marker = os.path.join(path, "proposal.json")
    if os.path.exists(marker):
        with open(marker) as f:
            return json.load(f)
    return legacy_spec(config, task)


def spec_hash(spec: dict) -> str:
    return provenance.unit_key({"proposal_spec": spec})[:10]


def shipped_head_path(config, name: str, spec: dict) -> str:
    """The first shipped head folder ``<name>_poke*`` trained on ``spec`` ("" if none)."""
    root = shipped_path(config, "")
    if not root:
        return ""
    task = make_task(config, name)
    for d in sorted(os.listdir(root)):
        path = os.path.join(root, d)
        if ((d == f"{name}_poke" or d.startswith(f"{name}_poke_")) and os.path.isdir(path)
                and _spec_of(path, config, task) == spec):
            return path
    return ""


def shipped_path(config, name: str) -> str:
    """Folder of the shipped weights ``name`` ("" when ``config.pretrained_dir`` is ""; a
    value naming no folder raises: ``artifacts.pretrained_root``)."""
    root = artifacts.pretrained_root(config)
    return os.path.join(root, name) if root else ""


def _workdir_path(workdir: str, name: str) -> str:
    return os.path.join(os.path.abspath(workdir), "models", name)


def _context(workdir: str, key: str) -> study.Context:
    """A context for training outside a unit (the training binaries, notebook lookups)."""
    return study.Context(f"models-{key}", key, workdir,
                         os.path.join(workdir, "checkpoints", key))


def _bind(task, graphdef, params) -> TaskModel:
    return TaskModel(task, graphdef, params,
                     jax.jit(functools.partial(model_lib.apply, graphdef, params)))


def rollouts(config, m: TaskModel, seed_offset: int, num: int,
             proposal: dict | None = None) -> poke.Rollouts:
    """``num`` rollouts of the ``proposal`` spec (default ``legacy_spec``) of ``m`` on
    fresh prompts, in batches of 1024."""
    spec = proposal or legacy_spec(config, m.task)
    prompt, _ = sample(m.task, jax.random.key(config.seed + seed_offset), num)
    chunks = [poke.collect_rollouts(
        jax.random.key(seed_offset + i), m.denoise_fn, prompt[i:i + 1024], m.task.answer_len,
        mask_id=m.task.mask_id, **spec)
        for i in range(0, num, min(num, 1024))]
    return jax.tree.map(lambda *x: jnp.concatenate(x), *chunks)


def train_denoiser(config, ctx: study.Context, name: str) -> tuple[TaskModel, dict]:
    """Trains ``name``'s denoiser (chunks in ``ctx``) and exports it to the workdir.

    Returns:
      (the model, its history {"step", "train_loss", "eval_loss"}).
    """
    task, kw = make_task(config, name), _train_kwargs(config, name)
    graphdef, params, history = train_lib.train(
        task, model_config(config, task), seed=config.seed,
        runner=ctx.sub(f"train_{name}").run_chunks, **kw)
    path = _workdir_path(ctx.workdir, name)
    weights.save_denoiser(path, model_config(config, task), params, step=kw["steps"],
                          record={"unit_key": model_key(config, name)})
    _stamp(path, weights_record(config, name))
    results.write_json(_workdir_path(ctx.workdir, f"{name}_history.json"), history)
    logging.info("%s denoiser trained (eval loss %.4f)", name, history["eval_loss"][-1])
    return _bind(task, graphdef, params), history


def _stamp(path: str, trained_for: dict) -> None:
    """Adds to the record of the weights just saved in ``path`` what ties them to their
    bytes and to ``trained_for`` (``artifacts.stamp``; checked by ``artifacts.verify``)."""
    record = weights.read_record(path)
    results.write_json(os.path.join(path, weights.RECORD),
                       {**record, **artifacts.stamp(path, trained_for)})


def head_dir(name: str, spec: dict) -> str:
    """Folder name of ``name``'s head trained on ``spec`` (in ``<workdir>/models``)."""
    return f"{name}_poke_{spec_hash(spec)}"


def train_poke(config, ctx: study.Context, m: TaskModel, name: str,
               proposal: dict | None = None) -> tuple[Any, Any]:
    """Fits the POKE head of ``m`` (task ``name``) on rollouts of ``proposal`` (default
    ``legacy_spec``; chunks in ``ctx``); exports it with its ``proposal.json``."""
    pc, spec = config.poke, proposal or legacy_spec(config, m.task)
    graphdef, params, _, _ = poke.fit(
        rollouts(config, m, 1, pc.rollouts, spec), hidden=pc.hidden, steps=pc.steps,
        batch_size=pc.batch_size, lr=pc.lr, seed=config.seed, num_chunks=pc.num_chunks,
        runner=ctx.sub(f"poke_{name}_{spec_hash(spec)}").run_chunks)
    path = _workdir_path(ctx.workdir, head_dir(name, spec))
    weights.save_value_head(path, params, d_model=config.model.d_model, hidden=pc.hidden,
                            step=pc.steps, record={"unit_key": model_key(config, name, True,
                                                                         spec)})
    _stamp(path, weights_record(config, name, head=True))
    results.write_json(os.path.join(path, "proposal.json"), spec)
    return graphdef, params


class Models:
    """The models of one run: each loaded (or trained) at most once."""

    def __init__(self, config, workdir: str):
        self.config, self.workdir, self._loaded = config, workdir, {}

    def _ctx(self, ctx, name: str, head: bool = False,
             proposal: dict | None = None) -> study.Context:
        return ctx or _context(self.workdir, model_key(self.config, name, head, proposal))

    def denoiser(self, name: str, ctx: study.Context | None = None) -> TaskModel:
        """The shipped denoiser of ``name``, else the workdir's, else a newly trained one."""
        if name not in self._loaded:
            c, task = self.config, make_task(self.config, name)
            cfg = model_config(c, task)
            saved = _lookup(shipped_path(c, name), _workdir_path(self.workdir, name),
                            model_key(c, name), f"{name} denoiser", weights_record(c, name),
                            lambda path: weights.load_denoiser(path, cfg))
            self._loaded[name] = (_bind(task, saved.graphdef, saved.params) if saved else
                                  train_denoiser(c, self._ctx(ctx, name), name)[0])
        return self._loaded[name]

    def poke_head(self, name: str, ctx: study.Context | None = None,
                  proposal: dict | None = None) -> tuple[Any, Any]:
        """(graphdef, params) of ``name``'s POKE head trained on ``proposal`` (default
        ``legacy_spec``), looked up like the denoiser (module docstring)."""
        c, m = self.config, self.denoiser(name, ctx)
        spec = proposal or legacy_spec(c, m.task)
        slot = head_dir(name, spec)
        if slot not in self._loaded:
            self._loaded[slot] = _lookup(
                shipped_head_path(c, name, spec), _workdir_path(self.workdir, slot),
                model_key(c, name, True, spec), f"{name} POKE head",
                weights_record(c, name, head=True),
                lambda path: weights.load_value_head(path, d_model=c.model.d_model,
                                                     hidden=c.poke.hidden)
            ) or train_poke(c, self._ctx(ctx, name, True, spec), m, name, spec)
        return self._loaded[slot]


def _lookup(shipped: str, trained: str, key: str, what: str, expected: dict, load):
    """``load(folder)`` of the shipped folder, else of the workdir's, else None (nothing
    saved: the caller trains). The workdir's weights must carry ``key``; weights that do
    not fit raise (module docstring), naming the folder and the fields."""
    for path, field in ((shipped, "config.pretrained_dir"), (trained, "workdir models")):
        if not path or not os.path.isdir(path):
            continue
        found = weights.read_record(path).get("unit_key")
        if field == "workdir models" and found != key:
            raise ValueError(
                f"`workdir`: the {what} in {path} was trained under another config or code "
                f"version (key {found!r}, this run's {key!r}: its training settings, seed "
                "or the code differ); delete the folder or use another workdir to train a "
                "new one.")
        artifacts.verify(path, what, field, expected)
        logging.info("%s from %s", what, path)
        try:
            return load(path)
        except (ValueError, FileNotFoundError) as e:
            raise ValueError(f"`{field}`: the {what} in {path}: {e}") from e
    return None


def train_denoisers(config, workdir: str) -> dict:
    """experiments/dllm_train.py: trains every task's denoiser into ``workdir/models``
    (resumable); returns {task: final held-out diffusion loss}."""
    config_lib.validate_config(config)
    return {name: train_denoiser(config, _context(workdir, model_key(config, name)),
                                 name)[1]["eval_loss"][-1] for name in config.tasks}


def default_proposal(config, task) -> dict:
    """The proposal of the study's untuned settings (``config.particle_blocks``,
    ``config.temperature``, ``config.position_temperature``)."""
    return proposal_spec(config, task, {
        "particle_blocks": config.get("particle_blocks", "one"),
        "temperature": config.temperature,
        "position_temperature": config.get("position_temperature", 1.0)})


def train_poke_heads(config, workdir: str) -> dict:
    """experiments/poke_train.py: fits every task's POKE head on its (shipped) denoiser and
    the study's untuned proposal (``default_proposal``) into ``<workdir>/models/<task>_poke_
    <spec hash>``; returns {task: held-out fit (``poke.evaluate``)}."""
    config_lib.validate_config(config)
    models, out = Models(config, workdir), {}
    for name in config.tasks:
        m = models.denoiser(name)
        spec = default_proposal(config, m.task)
        head = train_poke(config, _context(workdir, model_key(config, name, True, spec)), m,
                          name, spec)
        out[name] = poke.evaluate(*head, rollouts(config, m, 2, 512, spec))
        logging.info("%s POKE head held-out fit: %s", name, out[name])
    return out
