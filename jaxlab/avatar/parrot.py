"""A PARROT-class aligner on ott-jax: position-aware cost, soft anchor prior, edge term.

PARROT (Zeng, Zhang, Xia, Tong, "PARROT: Position-Aware Regularized Optimal Transport for
Network Alignment", WWW 2023) as AvAtar's network-alignment experiments call it (through
PlanetAlign; anchors enter only through the aligner). What follows the paper / its use
in AvAtar (yq-leo/AvAtar-ICML26, ``source/active_na.py``: the plan ``T`` and PARROT's cost
``C`` go to the score, with eps = lambda_p + lambda_n + lambda_a):

  1. position features: random walk with restart from every anchor on each graph,
     R1 = RWR_1[:, A], R2 = RWR_2[:, truth(A)] (``tasks.rwr_matrix``: an exact linear
     solve, restart 0.2); position cost exp(-cos(R1_i, R2_j));
  2. attribute cost exp(-cos(x1_i, x2_j)) (when the task has attributes);
  3. node cost C0 = position + ``attr_weight`` attribute, anchor pairs set to 0;
  4. the cost spread over the product graph by RWR: C = (1 - beta) C0 + beta W1 C W2^T
     (fixed point; ``product_rwr``: K = ``prod_iters`` iterations from C0, error in the
     Frobenius norm ||C_K - C||_F <= beta^K ||C0 - C||_F <= 2 beta^(K+1) ||C0||_F, since
     W1 and W2 have spectral norm <= 1; not a max-norm bound, as the symmetric-normalised
     adjacency can have row sums > 1), then min-max normalised to [0, 1] and anchor pairs
     set to 0 again (ours: after the diffusion an anchor pair was not the cheapest entry of
     its row on isomorphic test pairs);
  5. proximal point on the regularised OT objective::

        <C, T> - lambda_e n <A1 T A2, T> + lambda_a KL(T || H)        (edge, prior)

     each step the linearised subproblem plus lambda_p KL(T || T_{k-1}), i.e. entropic OT
     with eps = lambda_a + lambda_p on the cost::

        C - 2 lambda_e n A1 T_{k-1} A2 - lambda_a log H - lambda_p log T_{k-1}

     (ott-jax Sinkhorn, log-domain, uniform marginals), from T_0 = 1 / n^2. The first
     step (ours, a simplification) leaves the edge term out and solves on
     C - lambda_a log H only. That is not exact: at T_0 the edge term is
     2 lambda_e n A1 T_0 A2^T = 2 lambda_e (A1 1)(A2 1)^T / n, constant across pairs only
     when A1 1 and A2 1 are (regular graphs); on other graphs it would favour pairs of
     high-degree nodes. (The proximal term lambda_p log T_0 is a constant there, so
     leaving it out is exact.) Later steps use the full linearisation.

  H is the soft anchor prior: H_ij = 1 on anchor pairs, 1/n elsewhere (the plan is
  pulled toward anchor pairs through the cost, rows are not pinned).

What is ours (not checked against PARROT's code, which is not in our corpora): W1 / W2 and
A1 / A2 are the symmetric-normalised adjacencies I - L (``task.lap1`` / ``lap2``; PARROT
diffuses with the row-normalised ones); the neighbourhood-consistency term (lambda_n) is
not implemented; H's off-anchor value 1/n; the default weights (``PARROT_DEFAULTS``; not
tuned on any reported seed). float32 in the log domain: the Sinkhorn error is reported by
the solve (``PlanResult``) like every other plan of the loop.

Whole graphs (ours; ``tasks.GraphTask``, ``datasets.full_task``): the same steps with
nothing n x n derived from the adjacency. W1 / W2 (= A1 / A2) are BCOO float32 sparse
matrices, so W1 C W2^T (product RWR, edge term) is two sparse x dense products
(``bilinear``: O(nnz(W1) n2 + nnz(W2) n1) instead of O(n1 n2 (n1 + n2)); ``sparse_matmul``
blocks the dense columns to bound the CPU gather buffer); the position features are the
RWR columns of the k potential anchors only (``tasks.rwr_columns``: sparse LU, not the
dense inverse), in pair order, and the mask is over the k ground-truth pairs. Plans are
rectangular [n1, n2] with uniform marginals 1/n1, 1/n2; where the formulas above say n
(the edge weight lambda_e n, H's 1/n) we use sqrt(n1 n2) (exactly n on a square task).
Cost, plan, prior and the Sinkhorn solve stay dense float32 [n1, n2]. On a square task
the dense path is unchanged (bit for bit); ``tasks.as_graph_task`` runs the sparse path on
it, equal to the dense one to float32 rounding (tests/avatar/test_fullgraph.py).
``proximal_step`` is one step of the proximal loop (``parrot_solve`` is ``parrot_cost``,
``log_prior``, then ``prox_iters`` of them), public so a benchmark can time each
subproblem (experiments/bench_avatar_fullgraph.py; docs/avatar_fullgraph.md).

Checks (eager; shapes and dtypes also under ``jit``): ``mask`` [k] with a bool dtype
(TypeError otherwise; ``node_cost``, ``parrot_cost``, ``log_prior``, ``parrot_solve``); the
settings (``check_settings``, also in ``parrot_cost``): the weights finite
and >= 0, ``lambda_p`` finite and > 0, ``restart`` in (0, 1); ``prod_iters`` /
``prox_iters`` positive ints (ValueError naming the argument); ``product_rwr``: ``w1`` /
``w2`` of shape [n1, n1] / [n2, n2].

Cost (measured on a 400-node ACM-DBLP subsample, one seed, shared 2-core CPU): each
Sinkhorn subproblem at eps = 5e-3 took ~2000 iterations (~6 s wall); the defaults (eps = 1e-2,
two proximal steps) halve that, which is what made an 8-seed active run fit here.
"""

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse as jsparse

from jaxlab.avatar import alignment, solvers, tasks
from jaxlab.core import validation
from jaxlab.core.types import Array

__all__ = ["ParrotSettings", "PARROT_DEFAULTS", "epsilon", "product_rwr", "node_cost",
    "parrot_cost", "log_prior", "proximal_step", "parrot_solve"]


class ParrotSettings(NamedTuple):
    """PARROT-class weights (static Python numbers).

    Attributes:
      attr_weight: weight of the attribute cost.
      restart: beta of the product-graph RWR (share of the neighbours' cost).
      prod_iters: fixed-point iterations of the product-graph RWR.
      lambda_e: edge-consistency weight.
      lambda_a: weight of KL(T || H), the soft anchor prior.
      lambda_p: proximal weight; the plan's entropic eps is lambda_a + lambda_p.
      prox_iters: proximal-point steps (1: entropic OT on C with the prior only).
    """

    attr_weight: float = 1.0
    restart: float = 0.5
    prod_iters: int = 8
    lambda_e: float = 0.05
    lambda_a: float = 1e-3
    lambda_p: float = 9e-3
    prox_iters: int = 2


PARROT_DEFAULTS = ParrotSettings()


def check_settings(s: ParrotSettings) -> None:
    """Raises ValueError naming the bad field of a ParrotSettings."""
    for name in ("attr_weight", "lambda_e", "lambda_a"):
        validation.check_in_range(name, getattr(s, name), 0.0, np.inf, high_inclusive=False)
    validation.check_in_range("lambda_p", s.lambda_p, 0.0, np.inf, low_inclusive=False,
                              high_inclusive=False)
    validation.check_in_range("restart", s.restart, 0.0, 1.0, low_inclusive=False,
                              high_inclusive=False)
    validation.check_positive_int("prod_iters", s.prod_iters)
    validation.check_positive_int("prox_iters", s.prox_iters)


def epsilon(s: ParrotSettings) -> float:
    """The entropic eps of PARROT's plan: lambda_a + lambda_p (AvAtar's code adds the
    regularisation weights the same way)."""
    return s.lambda_a + s.lambda_p


SPMM_BLOCK = 512  # dense columns per block of a sparse x dense product (``sparse_matmul``)


def sparse_matmul(w: jsparse.BCOO, x: Array, block: int | None = None) -> Array:
    """[n, m] W @ X for a BCOO W [n, n'] and a dense X [n', m], ``block`` columns at a time
    (None: ``SPMM_BLOCK``, read at call time).

    ``lax.map`` over column blocks of X (zero-padded to a multiple of ``block``): on CPU a
    BCOO product materialises one [nnz, columns] gather, so one block bounds that buffer to
    nnz x ``block`` (measured on ACM's 79k non-zeros x 9,916 columns, loaded 2-core CPU:
    6.6 s and a 3 GB buffer unblocked, 1.55 s blocked at 256 or 1024 columns).

    Raises:
      ValueError: ``block`` is not a positive int, ``x`` is not 2-D, or its rows do not
        match W's columns.
    """
    block = SPMM_BLOCK if block is None else block
    validation.check_positive_int("block", block)
    validation.check_ndim("x", x, 2)
    if x.shape[0] != w.shape[1]:
        raise ValueError(f"`x` has {x.shape[0]} rows; the sparse matrix has {w.shape[1]} "
                         "columns.")
    n, m = x.shape
    nb = -(-m // block)
    xb = jnp.pad(x, ((0, 0), (0, nb * block - m))).reshape(n, nb, block).transpose(1, 0, 2)
    y = jax.lax.map(lambda b: w @ b, xb)  # [nb, rows, block]
    return y.transpose(1, 0, 2).reshape(w.shape[0], nb * block)[:, :m]


def bilinear(w1, c: Array, w2, block: int | None = None) -> Array:
    """[n, m] W1 C W2^T, W1 [n, n] and W2 [m, m] dense (``(w1 @ c) @ w2.T``) or BCOO
    (two blocked sparse products of ``block`` columns, O(nnz(W1) m + nnz(W2) n))."""
    left = sparse_matmul(w1, c, block) if isinstance(w1, jsparse.BCOO) else w1 @ c
    if isinstance(w2, jsparse.BCOO):
        return sparse_matmul(w2, left.T, block).T
    return left @ w2.T


def product_rwr(c0: Array, w1, w2, restart: float, iters: int) -> Array:
    """[n, m] ``iters`` steps of C <- (1 - restart) C0 + restart W1 C W2^T from C0.

    The fixed point solves (I - restart W2 (x) W1) vec C = (1 - restart) vec C0 (random walk
    with restart over the product graph, restart probability 1 - ``restart``).

    Error: with W1, W2 of spectral norm <= 1 (e.g. the symmetric-normalised adjacencies
    D^-1/2 A D^-1/2 of the module), C -> W1 C W2^T does not increase the Frobenius norm, so
    after K = ``iters`` steps ||C_K - C||_F <= restart^K ||C0 - C||_F
    <= 2 restart^(K+1) ||C0||_F. There is no such bound in the max norm (a normalised
    adjacency can have row sums > 1).

    Args:
      c0: [n, m] node cost; w1: [n, n], w2: [m, m] transition matrices (spectral norm <= 1),
        dense or BCOO (``bilinear``).
      restart: in (0, 1) (exclusive); iters: positive int (static).

    Raises:
      ValueError: ``restart`` (concrete) outside (0, 1) or NaN; ``iters`` not a positive int;
        ``w1`` / ``w2`` not [n, n] / [m, m].
    """
    validation.check_in_range("restart", restart, 0.0, 1.0, low_inclusive=False,
                              high_inclusive=False)
    validation.check_positive_int("iters", iters)
    n, m = np.shape(c0)
    if tuple(w1.shape) != (n, n):
        raise ValueError(f"`w1` must have shape ({n}, {n}), got {tuple(w1.shape)}.")
    if tuple(w2.shape) != (m, m):
        raise ValueError(f"`w2` must have shape ({m}, {m}), got {tuple(w2.shape)}.")

    def body(c, _):
        return (1.0 - restart) * c0 + restart * bilinear(w1, c, w2), None

    c, _ = jax.lax.scan(body, c0, None, length=iters)
    return c


def _check_mask(task, mask) -> None:
    validation.check_shape("mask", mask, (tasks.num_pairs(task),))
    dtype = getattr(mask, "dtype", None)
    dtype = np.asarray(mask).dtype if dtype is None else dtype
    if dtype != np.bool_:
        raise TypeError(f"`mask` must be a bool array (anchor flags), got dtype {dtype}.")


def _anchor_pairs(task, mask: Array) -> Array:
    """[n1, n2] bool: True on the anchor pairs (src[p], tgt[p]) with mask[p] (square task:
    (k, truth[k]) with mask[k])."""
    src, tgt = tasks.pair_nodes(task)
    return jnp.zeros(tasks.plan_shape(task), bool).at[src, tgt].set(mask)


def _mean_size(task) -> float:
    """sqrt(n1 n2), the n of the module's formulas (exactly n on a square task)."""
    n1, n2 = tasks.plan_shape(task)
    return math.sqrt(n1 * n2)


def node_cost(task, mask: Array, attr_weight: float = 1.0) -> Array:
    """[n1, n2] C0 = exp(-cos(R1[:, A], R2[:, A])) + w exp(-cos(x1, x2)), 0 on anchor pairs
    (steps 1-3 of the module docstring; R1 / R2 the position features in pair order,
    ``tasks.anchor_positions``; A the anchored pairs).

    Raises:
      ValueError: ``mask`` not of shape [k] (k pairs; n on a square task). TypeError:
        ``mask`` not a bool array.
    """
    _check_mask(task, mask)
    m = mask.astype(jnp.float32)
    r1, r2 = tasks.anchor_positions(task)
    c = jnp.exp(-alignment.cosine_similarity(r1 * m[None, :], r2 * m[None, :]))
    f1, f2 = jnp.asarray(task.feat1, jnp.float32), jnp.asarray(task.feat2, jnp.float32)
    if f1.shape[1] > 1:
        c = c + attr_weight * jnp.exp(-alignment.cosine_similarity(f1, f2))
    return jnp.where(_anchor_pairs(task, mask), 0.0, c)


def parrot_cost(task, mask: Array, s: ParrotSettings = PARROT_DEFAULTS) -> Array:
    """[n1, n2] PARROT's cost in [0, 1]: ``node_cost`` spread by ``product_rwr``, min-max
    normalised.

    Raises:
      ValueError: a bad ``s`` field or ``mask`` shape. TypeError: ``mask`` not bool.
    """
    check_settings(s)
    c0 = node_cost(task, mask, s.attr_weight)
    w1, w2 = tasks.norm_adjacencies(task)
    c = product_rwr(c0, w1, w2, s.restart, s.prod_iters)
    lo, hi = jnp.min(c), jnp.max(c)
    c = (c - lo) / jnp.maximum(hi - lo, 1e-12)
    return jnp.where(_anchor_pairs(task, mask), 0.0, c)  # anchor pairs back to 0


def log_prior(task, mask: Array) -> Array:
    """[n1, n2] log H: 0 on anchor pairs, log(1/n) elsewhere (n = sqrt(n1 n2)).

    Raises:
      ValueError: ``mask`` not of shape [k]. TypeError: ``mask`` not a bool array.
    """
    _check_mask(task, mask)
    return jnp.where(_anchor_pairs(task, mask), 0.0, -jnp.log(_mean_size(task)))


def proximal_step(task, cost: Array, logh: Array, plan: Array,
                  s: ParrotSettings = PARROT_DEFAULTS, first: bool = False,
                  threshold: float = 1e-4, max_iterations: int = 10000) -> solvers.PlanResult:
    """One proximal-point step of ``parrot_solve`` (module step 5) from ``plan`` T_{k-1}.

    Entropic OT (eps = ``epsilon(s)``) on C - lambda_a log H, minus, unless ``first``,
    2 lambda_e n W1 T_{k-1} W2^T + lambda_p log T_{k-1} (n = sqrt(n1 n2)), shifted to a
    minimum of 0.

    Args:
      task: the task (its normalised adjacencies, ``tasks.norm_adjacencies``).
      cost: [n1, n2] ``parrot_cost``; logh: [n1, n2] ``log_prior``; plan: [n1, n2] T_{k-1}
        (unused when ``first``).
      s: ParrotSettings; first: the first step (edge and proximal terms left out, see the
        module docstring); threshold, max_iterations: the Sinkhorn tolerance / cap.

    Returns:
      PlanResult of this step's Sinkhorn solve.

    Raises:
      ValueError: a bad ``s`` field, or ``cost`` / ``logh`` / ``plan`` not [n1, n2].
    """
    check_settings(s)
    shape = tasks.plan_shape(task)
    for name, x in (("cost", cost), ("logh", logh), ("plan", plan)):
        if name != "plan" or not first:
            validation.check_shape(name, x, shape)
    lin = cost - s.lambda_a * logh
    # The first step leaves the edge term out (our simplification, not exact): at T_0 = 1/n^2
    # it is 2 lambda_e (A1 1)(A2 1)^T / n, which varies across pairs unless both graphs
    # are regular. Only the proximal term is a constant at T_0 (module docstring, 5).
    if not first:
        a1, a2 = tasks.norm_adjacencies(task)
        lin = lin - 2.0 * s.lambda_e * _mean_size(task) * bilinear(a1, plan, a2)
        lin = lin - s.lambda_p * jnp.log(jnp.maximum(plan, 1e-30))
    lin = lin - jnp.min(lin)  # a constant shift does not change the plan
    return solvers.entropic_solve(lin, epsilon(s), threshold, max_iterations)


def parrot_solve(task, mask: Array, s: ParrotSettings = PARROT_DEFAULTS,
                 threshold: float = 1e-4, max_iterations: int = 10000
                 ) -> tuple[Array, solvers.PlanResult]:
    """PARROT-class plan of the anchors ``mask`` (proximal point, module step 5).

    Args:
      task: an AlignmentTask (n nodes per side) or a ``tasks.GraphTask`` (n1 / n2 nodes).
      mask: [k] bool anchors over the task's pairs (square task: source nodes, anchor k <->
        truth[k]).
      s: ParrotSettings.
      threshold, max_iterations: each Sinkhorn subproblem's tolerance / cap.

    Raises:
      ValueError: a bad ``s`` field or ``mask`` shape. TypeError: ``mask`` not bool.

    Returns:
      ([n1, n2] PARROT cost C (for the scores, as AvAtar's code passes it), PlanResult of
      the last subproblem; ``converged`` is the AND over the subproblems, ``marginal_error``
      the last plan's).
    """
    check_settings(s)
    _check_mask(task, mask)
    cost = parrot_cost(task, mask, s)
    n1, n2 = cost.shape
    logh = log_prior(task, mask)
    plan = jnp.full((n1, n2), 1.0 / (n1 * n2), cost.dtype)
    ok = jnp.bool_(True)
    res = None
    for k in range(s.prox_iters):
        res = proximal_step(task, cost, logh, plan, s, k == 0, threshold, max_iterations)
        ok = ok & res.converged
        plan = res.plan
    return cost, solvers.PlanResult(plan, ok, res.marginal_error, res.iterations)
