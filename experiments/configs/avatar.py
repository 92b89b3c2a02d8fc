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
