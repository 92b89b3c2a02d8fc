"""Whole-graph AvAtar runs on disk: checkpoints, run keys, the machine's readings.

``jaxlab.avatar.wholegraph.run`` is a loop over rounds that hands its ``RunState`` to a
callback and writes nothing; this module is the house around it:

* ``run_resumable``: one (strategy, seed) run with the key ``jax.random.key(seed)``,
  resumed from its checkpoint when present; after every round the state goes to one
  ``.npz`` per run (``save_checkpoint``: a temporary name, then renamed) and a progress
  line to ``log``. A run stopped at any point loses at most the round in progress;
* checkpoint keys (``run_key``): a hash of the data, the settings, the protocol, the
  strategy, the seed and the code of the modules that compute a round (``source_digest``:
  their syntax trees without docstrings, comments or layout, ``code_text``). A mismatching
  or unreadable checkpoint is ignored with a warning, so a resumed run never reads another
  configuration's state;
* ``machine_readings``: the process's peak resident memory and the 1-minute load average,
  merged into every record (``wholegraph.run``'s ``measure``).

Imports only ``jaxlab`` and ``experiments.lib.results`` (for ``save_npz_atomic``).
"""

import ast
import hashlib
import inspect
import json
import os
import textwrap
import warnings
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.avatar import (
    adjoint,
    alignment,
    baselines,
    parrot,
    parrot_official,
    scores,
    tasks,
    teaching,
    wholegraph,
)

from . import results


def code_text(source: str) -> str:
    """The syntax tree of ``source`` without docstrings, comments or layout (``ast.dump``):
    what a checkpoint key hashes, so editing documentation does not invalidate a run."""
    tree = ast.parse(textwrap.dedent(source))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def source_digest() -> str:
    """SHA-256 of the code (``code_text``) of the modules and functions that compute a round
    (a checkpoint key part)."""
    h = hashlib.sha256()
    for obj in (parrot_official, parrot, adjoint, alignment, baselines, scores, tasks,
                teaching, wholegraph.resolve, wholegraph.initial_anchors, wholegraph.sizes,
                wholegraph.round_solve,
                wholegraph.initial_split, wholegraph.solve_round0, wholegraph.run,
                wholegraph._select, wholegraph._metrics, wholegraph._round_metrics):
        h.update(code_text(inspect.getsource(obj)).encode())
    return h.hexdigest()


def run_key(data_key: str, settings, protocol: wholegraph.Protocol, strategy: str,
            seed: int) -> str:
    """The checkpoint key of one run (data, settings, protocol, strategy, seed, code; for
    "ours" also the frozen variant ``wholegraph.OURS``)."""
    parts = [data_key, list(settings), list(protocol), strategy, int(seed), source_digest()]
    if strategy == "ours":
        parts.append([wholegraph.OURS[0], list(wholegraph.OURS[1])])
    text = json.dumps(parts)
    return hashlib.sha256(text.encode()).hexdigest()


def save_checkpoint(path: str, key: str, state: wholegraph.RunState) -> None:
    """Writes one run's state (after round ``state.step``) to ``path`` (atomic rename)."""
    rnd = state.solve
    arrays = {"key": np.asarray(key), "step": np.asarray(state.step),
              "anchors": np.asarray(state.anchors),
              "records": np.asarray(json.dumps(state.records)), "raw": np.asarray(rnd.raw),
              "cross": np.asarray(rnd.cross), "plan": np.asarray(rnd.plan),
              "y": np.asarray(rnd.y)}
    for name, v in rnd.stats._asdict().items():
        arrays[f"stats_{name}"] = np.asarray(v)
    if state.heldout is not None:
        arrays["heldout"] = np.asarray(state.heldout)
    for name, v in (state.round0_values or {}).items():
        arrays[f"round0_{name}"] = np.asarray(v)
    results.save_npz_atomic(path, arrays)


def load_checkpoint(path: str, key: str) -> wholegraph.RunState | None:
    """The RunState in ``path`` if it holds this ``key``, else None (a warning when a file
    exists but does not match or cannot be read)."""
    if not os.path.isfile(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            if str(z["key"]) != key:
                warnings.warn(f"checkpoint {path} belongs to another configuration or code "
                              "version; starting this run from round 0.", RuntimeWarning,
                              stacklevel=2)
                return None
            stats = parrot_official.PositionStats(
                **{f: jnp.asarray(z[f"stats_{f}"]) for f in
                   parrot_official.PositionStats._fields})
            rnd = wholegraph.Round(stats, jnp.asarray(z["raw"]), jnp.asarray(z["cross"]),
                                   jnp.asarray(z["plan"]), jnp.asarray(z["y"]))
            round0 = {f[len("round0_"):]: z[f].copy() for f in z.files
                      if f.startswith("round0_")}
            return wholegraph.RunState(int(z["step"]), z["anchors"].copy(), rnd,
                                       json.loads(str(z["records"])),
                                       z["heldout"].copy() if "heldout" in z.files else None,
                                       round0 or None)
    except (OSError, ValueError, KeyError) as e:
        warnings.warn(f"checkpoint {path} is unreadable ({e}); starting this run from round "
                      "0.", RuntimeWarning, stacklevel=2)
        return None


def peak_rss_gb() -> float:
    """Peak resident memory of this process so far (GB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def machine_readings() -> dict:
    """{"peak_rss_gb", "load_avg_1min"}: what every record of a study run carries."""
    return {"peak_rss_gb": peak_rss_gb(), "load_avg_1min": os.getloadavg()[0]}


def checkpoint_path(folder: str, strategy: str, seed: int) -> str:
    """The checkpoint file of one run in ``folder``."""
    return os.path.join(folder, f"run-{strategy}-seed{seed}.npz")


def run_resumable(task, graph, settings, protocol: wholegraph.Protocol, strategy: str,
                  seed: int, folder: str, data_key: str,
                  round0: wholegraph.RunState | None = None, compare_cold: bool = False,
                  compare_rounds: int | None = None, host=None,
                  log: Callable[[str], None] = print) -> list[dict]:
    """One (strategy, seed) run of ``wholegraph.run`` with ``jax.random.key(seed)``, resumed
    from its checkpoint in ``folder`` when present, checkpointed after every round.

    Args:
      task, graph, settings, protocol, strategy, compare_cold, compare_rounds, host: as
        ``wholegraph.run``.
      seed: int >= 0 (the key, the checkpoint's name and key).
      folder: checkpoint folder; data_key: the task cache digest (part of the key).
      round0: optional ``wholegraph.solve_round0`` state of this seed (shared by the
        strategies); solved here when None and no checkpoint is there.
      log: callable taking one progress line.

    Returns:
      [rounds + 1] records (round 0 = the initial anchors), each with the metrics, the
      round's times, solver diagnostics, peak memory and load.
    """
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"`seed` must be an integer >= 0, got {seed!r}.")
    ckpt_key = run_key(data_key, settings, protocol, strategy, seed)
    path = checkpoint_path(folder, strategy, seed)
    state = load_checkpoint(path, ckpt_key)
    if state is not None:
        log(f"  {strategy} seed {seed}: resumed after round {state.step}")
    else:
        state = round0

    def after_round(st: wholegraph.RunState) -> None:
        save_checkpoint(path, ckpt_key, st)
        rec = st.records[-1]
        log(f"  {strategy} seed {seed} round {st.step}/{protocol.rounds}: MRR "
            f"{rec['mrr']:.4f} ({rec['round_s']:.1f} s: select {rec['select_s']:.1f}, solve "
            f"{rec['solve_s']:.1f}; product RWR {rec['prod_steps']} steps; CG "
            f"{rec['cg_iterations']})")

    out = wholegraph.run(jax.random.key(seed), task, graph, settings, protocol, strategy,
                         state=state, compare_cold=compare_cold,
                         compare_rounds=compare_rounds, host=host, measure=machine_readings,
                         callback=after_round)
    return out.records
