"""What AvAtar's released code leaves open, measured on an ACM-DBLP subgraph with PARROT as
its official code runs it (``jaxlab.avatar.parrot_official``, ``wholegraph``).

``--measure=precision``: how precise must the adjoint solve be for the released picks?
Round 0 of each seed (20% initial anchors): AvAtar's released score (sq_l2 utility,
``scores.official_score`` on PARROT's cost) with the adjoint solved by float32 Jacobi CG
(``adjoint.solve_adjoint``) at each tolerance, against a float64 Cholesky solve of the
same system on the host (null direction pinned). Agreement: the share of the round's
picks (the protocol's per-round count of best unanchored pairs) both solves make.

``--measure=cost``: which cost is scored? The same picks (exact solve) with PARROT's cost
after the product RWR (ours, ``Cost.cross``) and with the node cost before it
(exp(-cos) of the attributes + alpha x exp(-cos) of the RWR features, anchors zeroed):
their overlap and the share of each pick set the plan already ranks first.

``--measure=rwr``: the RWR anchors frozen at the initial ones or growing with each
query (``Protocol.frozen_rwr``): 10 rounds of AvAtar and entropy per seed, the paper's
metric, the never-queried one (20% held out) and the removal-only line.

The subgraph: a snowball of ``--nodes`` ground-truth nodes of graph 1 (``datasets.snowball``),
their partners in graph 2, the induced subgraphs, pairs with an isolated node on either
side dropped (repeated until none is left).

  python -m experiments.avatar_precision --workdir=/tmp/unknowns --measure=precision
"""

import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
from absl import app, flags

from jaxlab.avatar import adjoint, alignment, datasets, parrot_official, scores, wholegraph

from .lib import console, provenance, results

_WORKDIR = flags.DEFINE_string("workdir", None, "Output folder (<measure>.json).")
_MEASURE = flags.DEFINE_enum("measure", "precision", ["precision", "cost", "rwr"],
                             "What to measure (module docstring).")
_NODES = flags.DEFINE_integer("nodes", 1000, "Ground-truth nodes of the snowball.")
_SEEDS = flags.DEFINE_integer("seeds", 3, "Seeds (subgraph and initial anchors).")
_TOLS = flags.DEFINE_list("tols", ["1e-4", "1e-5", "1e-6"], "CG tolerances (precision).")


def subgraph_pair(name: str, nodes: int, seed: int) -> datasets.NetworkPair:
    """The induced subgraphs of a snowball of ``nodes`` ground-truth nodes (module
    docstring), pairs in snowball order."""
    data = datasets.load_pair(name)
    partner = np.full(data.adj1.shape[0], -1)
    partner[data.pairs[:, 0]] = data.pairs[:, 1]
    src = datasets.snowball(np.random.default_rng(seed), data.adj1, partner >= 0, nodes)
    tgt = partner[src]
    while True:
        a1 = data.adj1[src][:, src].tocsr()
        a2 = data.adj2[tgt][:, tgt].tocsr()
        keep = (np.diff(a1.indptr) > 0) & (np.diff(a2.indptr) > 0)
        if keep.all():
            break
        src, tgt = src[keep], tgt[keep]
    m = len(src)
    return datasets.NetworkPair(a1, a2, data.feat1[src], data.feat2[tgt],
                                np.stack([np.arange(m), np.arange(m)], 1))


def exact_adjoint(plan, grad_plan) -> np.ndarray:
    """[n + m] float64 solution of the adjoint system (``adjoint`` module docstring) by a
    Cholesky solve with the null direction (1, -1) pinned."""
    t = np.asarray(plan, np.float64)
    g = np.asarray(grad_plan, np.float64)
    a, b = t.sum(1), t.sum(0)
    h = np.block([[np.diag(a), t], [t.T, np.diag(b)]])
    u = np.concatenate([np.ones_like(a), -np.ones_like(b)])
    h += np.outer(u, u) / u.size
    rhs = np.concatenate([(t * g).sum(1), (t * g).sum(0)])
    return scipy.linalg.cho_solve(scipy.linalg.cho_factor(h), rhs)


def _picks(plan, cost, y, eps, anchors, src, num) -> np.ndarray:
    gc = adjoint.gradient_from_adjoint(plan, 2.0 * plan, jnp.asarray(y, plan.dtype), eps)
    s = jnp.where(anchors, -jnp.inf, scores.official_score(plan, cost, gc)[src])
    return np.asarray(jax.lax.top_k(s, num)[1])


def _setup(nodes, seed, protocol):
    s = parrot_official.ACM_DBLP
    pair = subgraph_pair("acm_dblp", nodes, seed)
    task = datasets.task(pair, restart=s.restart)
    g = parrot_official.prepare(task, pair.adj1, pair.adj2, s)
    return task, g, s, parrot_official.host_products(g)


def round0(nodes, seed):
    protocol = wholegraph.Protocol()
    task, g, s, host = _setup(nodes, seed, protocol)
    r0 = wholegraph.solve_round0(jax.random.key(seed), task, g, s, protocol, host=host)
    num = wholegraph.sizes(len(task.src), protocol)[1]
    return task, g, s, r0, num


def precision(nodes: int, seed: int, tols) -> dict:
    task, _, s, r0, num = round0(nodes, seed)
    plan, cross, anchors = r0.solve.plan, r0.solve.cross, jnp.asarray(r0.anchors)
    src, eps = jnp.asarray(task.src), parrot_official.epsilon(s)
    ref = set(_picks(plan, cross, exact_adjoint(plan, 2.0 * plan), eps, anchors, src,
                     num).tolist())
    out = {"pairs": int(len(task.src)), "seed": seed, "picks": num, "tols": {}}
    for tol in tols:
        y, info = adjoint.solve_adjoint(plan, 2.0 * plan, tol, 20_000)
        got = set(_picks(plan, cross, y, eps, anchors, src, num).tolist())
        out["tols"][f"{tol:g}"] = {"agreement": len(got & ref) / num,
                                   "residual": float(info.residual),
                                   "iterations": int(info.iterations),
                                   "converged": bool(info.converged)}
    return out


def cost_choice(nodes: int, seed: int) -> dict:
    task, g, s, r0, num = round0(nodes, seed)
    plan, cross, anchors = r0.solve.plan, r0.solve.cross, jnp.asarray(r0.anchors)
    src, tgt, eps = jnp.asarray(task.src), jnp.asarray(task.tgt), parrot_official.epsilon(s)
    pos_cross, _, _ = parrot_official.position_costs(r0.solve.stats, g)
    node = (parrot_official.exp_cos_cost(jnp.asarray(task.feat1, jnp.float32),
                                         jnp.asarray(task.feat2, jnp.float32))
            + s.alpha * pos_cross)
    node = jnp.where(parrot_official.anchor_mask(task, anchors), 0.0, node)
    y = exact_adjoint(plan, 2.0 * plan)
    first = alignment.top1_probability(plan, src, tgt)
    out = {"pairs": int(len(task.src)), "seed": seed, "picks": num,
           "pool_correct": float(jnp.mean(first[~anchors]))}
    picked = {}
    for label, c in (("cross", cross), ("node", node)):
        picked[label] = _picks(plan, c, y, eps, anchors, src, num)
        out[f"picked_correct_{label}"] = float(jnp.mean(first[picked[label]]))
    out["overlap"] = len(set(picked["cross"].tolist()) & set(picked["node"].tolist())) / num
    return out


def rwr(nodes: int, seed: int) -> dict:
    out = {"seed": seed}
    for frozen in (False, True):
        protocol = wholegraph.Protocol(heldout_frac=0.2, frozen_rwr=frozen)
        task, g, s, host = _setup(nodes, seed, protocol)
        out["pairs"] = int(len(task.src))
        r0 = wholegraph.solve_round0(jax.random.key(seed), task, g, s, protocol, host=host)
        for strategy in ("avatar", "entropy"):
            t0 = time.perf_counter()
            last = wholegraph.run(jax.random.key(seed), task, g, s, protocol, strategy,
                                  state=r0, host=host).records[-1]
            out[f"{strategy}_{'frozen' if frozen else 'growing'}"] = {
                m: last[m] for m in ("mrr", "heldout_mrr", "removal_mrr")}
            print(f"  seed {seed} {strategy} frozen={frozen}: " + ", ".join(
                f"{m} {last[m]:.4f}" for m in ("mrr", "heldout_mrr", "removal_mrr"))
                + f" ({time.perf_counter() - t0:.0f} s)", flush=True)
    return out


def main(argv):
    del argv
    console.require_workdir(_WORKDIR.value)
    runs = []
    t0 = time.time()
    for seed in range(_SEEDS.value):
        if _MEASURE.value == "precision":
            r = precision(_NODES.value, seed, [float(t) for t in _TOLS.value])
        elif _MEASURE.value == "cost":
            r = cost_choice(_NODES.value, seed)
        else:
            r = rwr(_NODES.value, seed)
        runs.append(r)
        print(f"seed {seed}: {r}", flush=True)
    out = {"measure": _MEASURE.value, "nodes": _NODES.value, "runs": runs,
           "wall_s": time.time() - t0, "machine": provenance.machine()}
    if _MEASURE.value == "precision":
        out["mean_agreement"] = {k: float(np.mean([r["tols"][k]["agreement"] for r in runs]))
                                 for k in runs[0]["tols"]}
        print(f"mean agreement: {out['mean_agreement']}")
    results.write_json(os.path.join(_WORKDIR.value, f"{_MEASURE.value}.json"), out)
    print(console.results_line(_WORKDIR.value, f"{_MEASURE.value}.json"), flush=True)


if __name__ == "__main__":
    app.run(main, flags_parser=console.parse_flags)
