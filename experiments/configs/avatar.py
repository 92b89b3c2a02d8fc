"""Configs for experiments/avatar.py: get_config("smoke" | "quick" | "full").

quick (the suite; 155 s user CPU measured on the shared 2-core CPU): the hard
synthetic setting (no features, 20% edge noise, 5% initial anchors) and 150-node snowball
subsamples of ACM-DBLP and Foursquare-Twitter, the paper protocol, 8 seeds, sq_l2 utility
(the paper's default for network alignment), official / gain scores vs random / entropy /
density / topmatchings, adjoint scaling to n = 400. cpu_long (the README's figures): the
same tasks and seeds, both protocols, plus the ``abs`` score, scaling to n = 800. parrot:
the PARROT-class aligner on 200-node ACM-DBLP and Foursquare-Twitter subsamples (official
vs random / entropy / density / topmatchings; gain is not defined for that aligner).
full: the whole ACM-DBLP (9,872 x 9,916 nodes, 6,325 ground-truth pairs) and
Foursquare-Twitter (5,313 x 5,120, 1,609 pairs) graph pairs (``real_full``:
``datasets.full_task``, sparse ``tasks.GraphTask``, [n1, n2] plans, anchors and test set
over the ground-truth pairs; avatar-gain is not defined there and is skipped on them),
300-node hard synthetic, 16 seeds, every baseline, plus the jaxlab extensions (point clouds,
embeddings; not in the paper). Meant for one large accelerator, not a 24 GB CPU (never
run; the accelerator fit is estimated, not verified): XLA's buffers (CPU assignment,
compiled at the full shapes) are ~70 [n1, n2] float32 per seed with this strategy table
(27.5 GB on ACM-DBLP; topmatchings' 16 perturbed copies dominate, ~8-12 without it), so
``seed_chunk`` = 2 runs the 16 seeds two at a time (~55 GB) instead of all at once
(~430 GB); docs/avatar_fullgraph.md has the numbers.
"""

import ml_collections
import numpy as np

from jaxlab.core import validation


def get_config(arg: str = "quick") -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.mesh_shape = (-1,)  # batch axis over all devices (1-D mesh 'batch')
    c.task_seed = 0
    c.num_seeds = 8
    c.seed_chunk = 0  # seeds vmapped at once (0: all; the full preset's full graphs: 2)
    c.tasks = ["synthetic_hard", "acm_dblp", "foursquare_twitter"]
    c.protocols = ["paper"]
    c.strategies = ["avatar-official", "avatar-gain", "random", "entropy", "density",
                    "topmatchings"]
    c.aligner = "simple"  # or "parrot" (jaxlab.avatar.parrot; its own eps, see there)
    c.real_aligner = ""  # the aligner of acm_dblp / foursquare_twitter ("": c.aligner)
    c.utility = "sq_l2"
    c.epsilon = 0.05
    c.sinkhorn_threshold = 1e-4  # L1 marginal error of every plan (see avatar.run_active)
    c.sinkhorn_max_iterations = 10000
    c.cg_tol = 1e-4  # relative residual of the adjoint CG (see avatar.run_active)
    c.rounds = 10
    c.test_frac = 0.5  # "fixed" protocol only
    # "paper" protocol: nodes drawn before round 0 and never queried, measured beside the
    # paper's metric (the never-queried line; 0: none)
    c.heldout_frac = 0.2
    c.init_frac = 0.2
    c.hard_init_frac = 0.05  # initial anchors of synthetic_hard
    c.budget_frac = 0.2
    c.graph_nodes = 150
    c.hard_nodes = 150
    c.hard_edge_noise = 0.2
    c.real_nodes = 150  # snowball subsample size of acm_dblp / foursquare_twitter
    c.real_full = False  # True: the whole graph pairs instead (datasets.full_task)
    c.point_nodes = 150
    c.embedding_nodes = 150
    c.nonrigid = 0.15  # amplitude of the sinusoidal warp of point_cloud_nonrigid
    c.scaling_sizes = [100, 200, 400]  # n = 800 alone cost 79 s CPU (dense lstsq): cpu_long
    # Hard plans for the adjoint timing: non-uniform marginals, small epsilon, one size.
    c.scaling_hard_n = 200
    c.scaling_hard_eps = [0.01, 0.005]
    if arg == "smoke":
        c.num_seeds = 2
        c.tasks = ["karate"]
        c.protocols = ["paper", "fixed"]
        c.strategies = ["avatar-gain", "random"]
        c.rounds = 2
        c.scaling_sizes = [50, 100]
        c.scaling_hard_n = 50
        c.scaling_hard_eps = [0.01]
    elif arg == "cpu_long":  # the README's figures (2-core CPU: ~25 min of tasks when shared)
        c.protocols = ["paper", "fixed"]
        c.strategies = ["avatar-official", "avatar-abs", "avatar-gain", "random", "entropy",
                        "density", "topmatchings"]
        c.scaling_sizes = [100, 200, 400, 800]
    elif arg == "parrot":  # PARROT-class aligner on the real-data subsamples (README figures)
        c.tasks = ["acm_dblp", "foursquare_twitter"]
        c.aligner = "parrot"
        c.real_nodes = 200  # 1-2k did not fit the shared 2-core CPU (see parrot.py)
        # avatar-gain is not defined for the PARROT aligner (no anchor-position cost term).
        c.strategies = ["avatar-official", "random", "entropy", "density", "topmatchings"]
        c.scaling_sizes = [50, 100]
        c.scaling_hard_n = 50
        c.scaling_hard_eps = [0.01]
    elif arg == "full":
        c.num_seeds = 16
        c.strategies = ["avatar-official", "avatar-abs", "avatar-gain", "random", "entropy",
                        "margin", "degree", "betweenness", "density", "topmatchings"]
        c.tasks = ["synthetic_hard", "acm_dblp", "foursquare_twitter", "les_miserables",
                   "point_cloud", "point_cloud_nonrigid", "embeddings"]
        c.hard_nodes = 300
        c.real_full = True  # the whole ACM-DBLP / Foursquare-Twitter pairs (real_nodes unused)
        # PARROT-class there, as in the paper (the simple aligner's eps = 0.05 Sinkhorn did
        # not converge in ~3,800 iterations on the whole Foursquare-Twitter pair)
        c.real_aligner = "parrot"
        c.seed_chunk = 2  # 2 seeds per vmap: ~55 GB of XLA buffers on ACM-DBLP (see above)
        c.scaling_sizes = [250, 500, 1000, 2000, 4000]
    elif arg != "quick":
        raise ValueError(f"config arg must be smoke, quick, cpu_long, parrot or full, got "
                         f"{arg!r}.")
    return c


def validate_config(config) -> None:
    """Checks an AvAtar experiment config (``get_config``'s); raises ValueError
    naming ``config.<field>``. ``num_seeds`` >= 2 because a 95% CI is computed over seeds."""
    # imported here: a config loads without its method's package
    from jaxlab.avatar import datasets, loop, tasks, utilities

    validation.check_fields(config, {
        "epsilon": validation.POSITIVE, "rounds": validation.POSITIVE_INT,
        "test_frac": validation.UNIT_OPEN_RIGHT, "init_frac": validation.UNIT_OPEN_RIGHT,
        "budget_frac": validation.UNIT_OPEN_RIGHT, "graph_nodes": validation.POSITIVE_INT,
        "point_nodes": validation.POSITIVE_INT, "embedding_nodes": validation.POSITIVE_INT,
        "nonrigid": validation.NON_NEGATIVE, "sinkhorn_threshold": validation.POSITIVE,
        "hard_nodes": validation.POSITIVE_INT, "real_nodes": validation.POSITIVE_INT,
        "hard_init_frac": validation.UNIT_OPEN_RIGHT, "hard_edge_noise": validation.UNIT_OPEN_RIGHT,
        "sinkhorn_max_iterations": validation.POSITIVE_INT, "cg_tol": validation.POSITIVE})
    heldout = config.get("heldout_frac", 0.0)
    validation.check_in_range("config.heldout_frac", heldout, 0.0, 1.0, high_inclusive=False)
    validation.check_min_count("config.num_seeds", config.num_seeds, 2,
                               "a 95% confidence interval over seeds is computed")
    validation.check_min_count("config.graph_nodes", config.graph_nodes, 4,
                               "the Holme-Kim graph attaches 3 edges per node")
    for name in ("strategies", "tasks", "scaling_sizes", "protocols"):
        if len(config[name]) < 1:
            raise ValueError(f"`config.{name}` must not be empty.")
    names = (*loop.STRATEGIES, *(f"avatar-{s}" for s in loop.SCORES))
    for s in config.strategies:
        validation.check_one_of("config.strategies", s, names)
    for p in config.protocols:
        validation.check_one_of("config.protocols", p, loop.PROTOCOLS)
    known = ("synthetic_graph", "synthetic_hard", "point_cloud", "point_cloud_nonrigid",
             "embeddings", *tasks.REAL_GRAPHS, *datasets.DATASETS)
    for t in config.tasks:
        validation.check_one_of("config.tasks", t, known)
    validation.check_one_of("config.utility", config.utility, utilities.UTILITIES)
    validation.check_one_of("config.aligner", config.get("aligner", "simple"),
                            ("simple", "parrot"))
    if config.get("aligner", "simple") == "parrot" and "avatar-gain" in config.strategies:
        raise ValueError("`config.strategies`: avatar-gain is not defined for "
                         "`config.aligner`='parrot'.")
    validation.check_one_of("config.real_aligner", config.get("real_aligner", ""),
                            ("", "simple", "parrot"))
    real_aligner = config.get("real_aligner", "") or config.get("aligner", "simple")
    if (real_aligner == "parrot" and "avatar-gain" in config.strategies
            and not config.get("real_full", False)
            and any(t in datasets.DATASETS for t in config.tasks)):
        raise ValueError("`config.strategies`: avatar-gain is not defined for the PARROT-class "
                         "aligner that `config.real_aligner` sets on the real datasets.")
    chunk = config.get("seed_chunk", 0)
    if not isinstance(chunk, int | np.integer) or isinstance(chunk, bool) or chunk < 0:
        raise ValueError(f"`config.seed_chunk` must be an integer >= 0 (0: all seeds at "
                         f"once), got {chunk!r}.")
    real_full = config.get("real_full", False)
    if not isinstance(real_full, bool):
        raise ValueError(f"`config.real_full` must be a bool, got {real_full!r}.")
    if real_full and any(t in datasets.DATASETS for t in config.tasks):
        solver = {"simple": "ot", "parrot": "parrot"}[real_aligner]
        kept = [s for s in config.strategies
                if loop.graph_task_limit(*loop.parse_strategy(s), config.utility, solver) is None]
        if not kept:
            raise ValueError("`config.strategies`: none is defined on the full graphs "
                             "(`config.real_full`); see loop.graph_task_limit.")
    validation.check_min_count("len(config.scaling_sizes)", len(config.scaling_sizes), 2,
                               "the scaling unit fits a log-log slope")
    for v in config.scaling_sizes:
        validation.check_min_count("config.scaling_sizes", v, 2, "each is an n x n plan size")
    sizes = {"synthetic_graph": config.graph_nodes, "point_cloud": config.point_nodes,
             "point_cloud_nonrigid": config.point_nodes, "embeddings": config.embedding_nodes,
             "synthetic_hard": config.hard_nodes}
    for t in config.tasks:
        if t in datasets.DATASETS:
            # the full graphs' masks are over their ground-truth pairs (datasets.SIZES)
            n = datasets.SIZES[t][2] if real_full else config.real_nodes
        else:
            n = sizes[t] if t in sizes else tasks.REAL_GRAPHS[t]().number_of_nodes()
        init_frac = config.hard_init_frac if t == "synthetic_hard" else config.init_frac
        try:
            for p in config.protocols:
                loop.budget_sizes(n, heldout if p == "paper" else config.test_frac,
                                  init_frac, config.budget_frac, config.rounds)
        except ValueError as e:
            raise ValueError(f"config.budget_frac / config.rounds do not fit task {t!r} "
                             f"({n} nodes): {e}") from None
