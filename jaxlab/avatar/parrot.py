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
  5. proximal point on the regularised OT objective
        <C, T> - lambda_e n <A1 T A2, T> + lambda_a KL(T || H)        (edge, prior)
     each step the linearised subproblem plus lambda_p KL(T || T_{k-1}), i.e. entropic OT
     with eps = lambda_a + lambda_p on the cost
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

Checks (eager): ``mask`` [n] with a bool dtype (TypeError otherwise); the weights finite
and >= 0, ``lambda_p`` finite and > 0, ``restart`` in (0, 1); ``prod_iters`` /
``prox_iters`` positive ints (ValueError naming the argument).

Cost (measured on a 400-node ACM-DBLP subsample, one seed, shared 2-core CPU): each
Sinkhorn subproblem at eps = 5e-3 took ~2000 iterations (~6 s wall); the defaults (eps = 1e-2,
two proximal steps) halve that, which is what made an 8-seed active run fit here.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.avatar import alignment, solvers
from jaxlab.core import validation
from jaxlab.core.types import Array


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


def product_rwr(c0: Array, w1: Array, w2: Array, restart: float, iters: int) -> Array:
    """[n, m] ``iters`` steps of C <- (1 - restart) C0 + restart W1 C W2^T from C0.

    The fixed point solves (I - restart W2 (x) W1) vec C = (1 - restart) vec C0 (random walk
    with restart over the product graph, restart probability 1 - ``restart``).

    Error: with W1, W2 of spectral norm <= 1 (e.g. the symmetric-normalised adjacencies
    D^-1/2 A D^-1/2 of the module), C -> W1 C W2^T does not increase the Frobenius norm, so
    after K = ``iters`` steps ||C_K - C||_F <= restart^K ||C0 - C||_F
    <= 2 restart^(K+1) ||C0||_F. There is no such bound in the max norm (a normalised
    adjacency can have row sums > 1).

    Args:
      c0: [n, m] node cost; w1: [n, n], w2: [m, m] transition matrices (spectral norm <= 1).
      restart: in (0, 1) (exclusive); iters: positive int (static).

    Raises:
      ValueError: ``restart`` (concrete) outside (0, 1) or NaN; ``iters`` not a positive int.
    """
    validation.check_in_range("restart", restart, 0.0, 1.0, low_inclusive=False,
                              high_inclusive=False)
    validation.check_positive_int("iters", iters)

    def body(c, _):
        return (1.0 - restart) * c0 + restart * (w1 @ c @ w2.T), None

    c, _ = jax.lax.scan(body, c0, None, length=iters)
    return c


def _check_mask(task, mask) -> None:
    validation.check_shape("mask", mask, (np.shape(task.truth)[-1],))
    dtype = getattr(mask, "dtype", None)
    dtype = np.asarray(mask).dtype if dtype is None else dtype
    if dtype != np.bool_:
        raise TypeError(f"`mask` must be a bool array (anchor flags), got dtype {dtype}.")


def _anchor_pairs(task, mask: Array) -> Array:
    """[n, n] bool: True on the anchor pairs (k, truth[k]) with mask[k]."""
    n = np.shape(task.truth)[-1]
    return jnp.zeros((n, n), bool).at[jnp.arange(n), jnp.asarray(task.truth)].set(mask)


def node_cost(task, mask: Array, attr_weight: float = 1.0) -> Array:
    """[n, n] C0 = exp(-cos(RWR_1[:, A], RWR_2[:, truth A])) + w exp(-cos(x1, x2)), 0 on
    anchor pairs (steps 1-3 of the module docstring).

    Raises:
      ValueError: ``mask`` not of shape [n]. TypeError: ``mask`` not a bool array.
    """
    _check_mask(task, mask)
    truth = jnp.asarray(task.truth)
    m = mask.astype(jnp.float32)
    r1 = jnp.asarray(task.pos1, jnp.float32) * m[None, :]
    r2 = jnp.asarray(task.pos2, jnp.float32)[:, truth] * m[None, :]
    c = jnp.exp(-alignment.cosine_similarity(r1, r2))
    f1, f2 = jnp.asarray(task.feat1, jnp.float32), jnp.asarray(task.feat2, jnp.float32)
    if f1.shape[1] > 1:
        c = c + attr_weight * jnp.exp(-alignment.cosine_similarity(f1, f2))
    return jnp.where(_anchor_pairs(task, mask), 0.0, c)


def _norm_adj(lap):
    lap = jnp.asarray(lap, jnp.float32)
    return jnp.eye(lap.shape[0], dtype=lap.dtype) - lap


def parrot_cost(task, mask: Array, s: ParrotSettings = PARROT_DEFAULTS) -> Array:
    """[n, n] PARROT's cost in [0, 1]: ``node_cost`` spread by ``product_rwr``, min-max
    normalised."""
    c0 = node_cost(task, mask, s.attr_weight)
    c = product_rwr(c0, _norm_adj(task.lap1), _norm_adj(task.lap2), s.restart, s.prod_iters)
    lo, hi = jnp.min(c), jnp.max(c)
    c = (c - lo) / jnp.maximum(hi - lo, 1e-12)
    return jnp.where(_anchor_pairs(task, mask), 0.0, c)  # anchor pairs back to 0


def log_prior(task, mask: Array) -> Array:
    """[n, n] log H: 0 on anchor pairs, log(1/n) elsewhere."""
    n = np.shape(task.truth)[-1]
    return jnp.where(_anchor_pairs(task, mask), 0.0, -jnp.log(float(n)))


def parrot_solve(task, mask: Array, s: ParrotSettings = PARROT_DEFAULTS,
                 threshold: float = 1e-4, max_iterations: int = 10000
                 ) -> tuple[Array, solvers.PlanResult]:
    """PARROT-class plan of the anchors ``mask`` (proximal point, module step 5).

    Args:
      task: an AlignmentTask (n nodes per side).
      mask: [n] bool anchors (source nodes; anchor k <-> truth[k]).
      s: ParrotSettings.
      threshold, max_iterations: each Sinkhorn subproblem's tolerance / cap.

    Raises:
      ValueError: a bad ``s`` field or ``mask`` shape. TypeError: ``mask`` not bool.

    Returns:
      ([n, n] PARROT cost C (for the scores, as AvAtar's code passes it), PlanResult of the
      last subproblem; ``converged`` is the AND over the subproblems, ``marginal_error``
      the last plan's).
    """
    check_settings(s)
    _check_mask(task, mask)
    cost = parrot_cost(task, mask, s)
    n = cost.shape[0]
    a1, a2 = _norm_adj(task.lap1), _norm_adj(task.lap2)
    logh = log_prior(task, mask)
    eps = epsilon(s)
    plan = jnp.full((n, n), 1.0 / n**2, cost.dtype)
    ok = jnp.bool_(True)
    res = None
    for k in range(s.prox_iters):
        lin = cost - s.lambda_a * logh
        # Step 0 leaves the edge term out (our simplification, not exact): at T_0 = 1/n^2
        # it is 2 lambda_e (A1 1)(A2 1)^T / n, which varies across pairs unless both graphs
        # are regular. Only the proximal term is a constant at T_0 (module docstring, 5).
        if k > 0:
            lin = lin - 2.0 * s.lambda_e * n * (a1 @ plan @ a2.T)
            lin = lin - s.lambda_p * jnp.log(jnp.maximum(plan, 1e-30))
        lin = lin - jnp.min(lin)  # a constant shift does not change the plan
        res = solvers.entropic_solve(lin, eps, threshold, max_iterations)
        ok = ok & res.converged
        plan = res.plan
    return cost, solvers.PlanResult(plan, ok, res.marginal_error, res.iterations)
