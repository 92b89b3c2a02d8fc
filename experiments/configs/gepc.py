"""Configs for experiments/gepc.py and gepc_train.py: get_config("smoke" | "quick" | "full");
``validate_config`` checks one (the binaries call it first)."""

import ml_collections
import numpy as np

from jaxlab.core import validation


def get_config(arg: str = "quick") -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.mesh_shape = (-1,)  # batch axis over all devices (1-D mesh 'batch')
    c.id_dataset = "mnist"  # or "digits" (scikit-learn 8x8 digits, upsampled)
    c.image_size = 16
    c.id_classes = [0, 1, 2, 3, 4]
    # Stratified, shuffled ID splits (data.stratified_split, seed split_seed): the score
    # model trains on `train`, the OOD scorers (KDEs, GMMs) fit on `cal`, `test` is ID-test.
    c.split_seed = 0
    c.train_per_class = 320
    c.cal_per_class = 100
    c.test_per_class = 40  # 200 ID-test images (full: 80 -> 400)
    c.num_ood = 200  # images per OOD set (held-out classes: stratified over them)
    # Score model (shipped: experiments/pretrained/gepc_mnist16, trained by gepc_train.py).
    c.pretrained_dir = "experiments/pretrained/gepc_mnist16"
    c.channels = [16, 32, 32]
    c.train_steps = 3000
    c.train_chunks = 10
    c.batch_size = 64
    c.learning_rate = 2e-3
    # The clutter model (block c, trained-on-ID row): same UNet and settings, trained on
    # `clutter_train` ID clutter patches (shipped: experiments/pretrained/gepc_clutter16).
    c.clutter_pretrained_dir = "experiments/pretrained/gepc_clutter16"
    c.clutter_train = 1600
    c.clutter_train_steps = 800
    c.train_target = "id"  # which model experiments/gepc_train.py trains: "id" | "clutter"
    # GEPC (public-code settings).
    c.sqrt_abars = [0.99997, 0.9999, 0.9979, 0.9969]
    c.num_t = 2
    c.features = ["gepc_s"]  # official per-t features (CelebA config: + gepc_s_cos, _pair)
    c.agg_feat = "sum"
    c.group = ["hflip", "vflip", "rot90", "rot180", "shift_x", "shift_y"]
    c.rho = 0.3
    # Block (c): the invariant-clutter testbed.
    c.clutter_cal = 300  # clutter images the scorers are fitted on
    c.target_size = 7  # px of the embedded digit / shape
    c.target_strength = 1.0  # target brightness in (0, 1]: pixel value 2 strength - 1
    # Baselines.
    # MSMA: 10 geometric VE levels, NCSN's 1 .. 0.01 on [0, 1] images = 2 .. 0.02 on ours.
    c.msma_levels = 10
    c.msma_sigma_min, c.msma_sigma_max = 0.02, 2.0
    c.diffpath_steps = 10  # DiffPath-6D: DDIM inversion steps (official default 10)
    # Density model of MSMA and DiffPath-6D: StandardScaler + GaussianMixture chosen by
    # gmm_folds-fold held-out likelihood on the fit set only (scoring.fit_gmm_search).
    c.gmm_components = [1, 2, 4, 8]
    c.gmm_covariances = ["full", "diag"]
    c.gmm_folds = 5
    # Block (d), pretrained elsewhere: the MNIST model, the other digit dataset's id_classes
    # as ID (scorers fitted on elsewhere_fit_per_class per class of it).
    c.digits_elsewhere = True
    c.elsewhere_fit_per_class = 60
    c.bootstrap = 500
    c.eval_batch = 200
    if arg == "smoke":
        c.id_dataset = "digits"  # the quick preset covers MNIST with the shipped model
        c.train_per_class, c.cal_per_class, c.test_per_class, c.num_ood = 30, 20, 8, 40
        c.clutter_cal = 40
        c.clutter_train, c.clutter_train_steps, c.clutter_pretrained_dir = 40, 20, ""
        c.elsewhere_fit_per_class = 20
        c.gmm_components = [1, 2]
        c.train_steps, c.train_chunks = 20, 2
        c.bootstrap = 50
        c.eval_batch = 40
        c.pretrained_dir = ""  # train the tiny model in the test's workdir
    elif arg == "quick":
        # The suite's quick run (time budget): fewer images per set than the defaults; the
        # training split (train_per_class) and so the shipped models are unchanged.
        c.cal_per_class, c.test_per_class, c.num_ood = 60, 30, 120
        c.clutter_cal, c.elsewhere_fit_per_class = 150, 40
        c.bootstrap = 300
        c.eval_batch = 150
    elif arg == "full":
        # >= 400 ID-test and >= 400 per OOD set (faces: the 200 scikit-image ships).
        c.test_per_class, c.num_ood, c.clutter_cal = 80, 400, 500
        c.gmm_components = [1, 2, 4, 8, 16]
        c.gmm_covariances = ["full", "tied", "diag", "spherical"]  # the official grid's
        c.bootstrap = 2000
    else:
        raise ValueError(f"config arg must be smoke, quick or full, got {arg!r}.")
    return c


def validate_config(config) -> None:
    """Checks a GEPC experiment config (``get_config``'s); raises ValueError naming
    ``config.<field>``. ``bootstrap`` >= 2 because a bootstrap CI of the AUROC is computed."""
    # imported here: a config loads without its method's package
    from jaxlab.gepc import groups, residual, scoring

    validation.check_fields(config, {
        "image_size": validation.POSITIVE_INT, "train_per_class": validation.POSITIVE_INT,
        "test_per_class": validation.POSITIVE_INT, "num_ood": validation.POSITIVE_INT,
        "train_steps": validation.POSITIVE_INT,
        "train_chunks": validation.POSITIVE_INT, "batch_size": validation.POSITIVE_INT,
        "learning_rate": validation.POSITIVE, "num_t": validation.POSITIVE_INT,
        "rho": (0.0, 1.0, False, True), "msma_levels": validation.POSITIVE_INT,
        "msma_sigma_min": validation.POSITIVE, "msma_sigma_max": validation.POSITIVE,
        "diffpath_steps": validation.POSITIVE_INT, "gmm_folds": validation.POSITIVE_INT,
        "elsewhere_fit_per_class": validation.POSITIVE_INT,
        "eval_batch": validation.POSITIVE_INT, "sqrt_abars": (0.0, 1.0, False, True),
        "clutter_cal": validation.POSITIVE_INT, "target_size": validation.POSITIVE_INT,
        "target_strength": (0.0, 1.0, False, True),
        "clutter_train": validation.POSITIVE_INT,
        "clutter_train_steps": validation.POSITIVE_INT})
    if len(config.features) < 1:
        raise ValueError("`config.features` must name at least one official feature.")
    for name in config.features:
        validation.check_one_of("config.features", name, residual.OFFICIAL_FEATURES)
    validation.check_one_of("config.agg_feat", config.agg_feat, ("sum", "mean"))
    validation.check_min_count("config.clutter_cal", config.clutter_cal, 2,
                               "the KDE bandwidth needs two calibration rows")
    if config.target_size > config.image_size:
        raise ValueError(f"`config.target_size`={config.target_size} must not exceed "
                         f"`config.image_size`={config.image_size}.")
    validation.check_one_of("config.id_dataset", config.id_dataset, ("mnist", "digits"))
    validation.check_min_count("config.bootstrap", config.bootstrap, 2,
                               "a bootstrap confidence interval of the AUROC is computed")
    validation.check_min_count("config.cal_per_class", config.cal_per_class, 1,
                               "the OOD scorers are fitted on the calibration split")
    downsample = 2 ** (len(config.channels) - 1)
    if config.image_size % downsample:
        raise ValueError(f"`config.image_size` must be divisible by {downsample} (the UNet "
                         f"halves it {len(config.channels) - 1} times), got "
                         f"{config.image_size}.")
    if len(config.sqrt_abars) < 1 or config.num_t > len(config.sqrt_abars):
        raise ValueError(f"`config.num_t` must be in [1, len(config.sqrt_abars) = "
                         f"{len(config.sqrt_abars)}], got {config.num_t}.")
    if config.msma_sigma_min > config.msma_sigma_max:
        raise ValueError(f"`config.msma_sigma_min`={config.msma_sigma_min} must not exceed "
                         f"`config.msma_sigma_max`={config.msma_sigma_max}.")
    if len(config.gmm_components) < 1 or len(config.gmm_covariances) < 1:
        raise ValueError("`config.gmm_components` and `config.gmm_covariances` must each "
                         "name at least one candidate.")
    validation.check_int_range("config.gmm_components",
                               np.asarray(config.gmm_components, np.int64), 1, 2**31)
    for name in config.gmm_covariances:
        validation.check_one_of("config.gmm_covariances", name, scoring.GMM_COVARIANCES)
    # every GMM candidate must fit in a training fold of the smallest fit set
    smallest = min(config.cal_per_class * len(config.id_classes), config.clutter_cal,
                   config.elsewhere_fit_per_class * len(config.id_classes)
                   if config.digits_elsewhere else config.clutter_cal)
    limit = smallest * (config.gmm_folds - 1) // config.gmm_folds
    if config.gmm_folds < 2 or max(config.gmm_components) > limit:
        raise ValueError(f"`config.gmm_components` must not exceed {limit} (the rows of a "
                         f"training fold of the smallest fit set, {smallest} rows, "
                         f"`config.gmm_folds`={config.gmm_folds} >= 2), got "
                         f"{list(config.gmm_components)}.")
    validation.check_int_range("config.id_classes", np.asarray(config.id_classes, np.int64),
                               0, 10)
    if len(config.id_classes) < 1 or len(config.id_classes) >= 10:
        raise ValueError(f"`config.id_classes` must hold 1 to 9 digit classes (the rest are "
                         f"the held-out OOD set), got {list(config.id_classes)}.")
    if len(config.group) < 1:
        raise ValueError("`config.group` must name at least one group element.")
    for name in config.group:
        validation.check_one_of("config.group", name, groups.ELEMENTS)
    validation.check_one_of("config.train_target", config.train_target, ("id", "clutter"))
    if config.clutter_train_steps % config.train_chunks:
        raise ValueError(f"`config.clutter_train_steps`={config.clutter_train_steps} must be "
                         f"divisible by `config.train_chunks`={config.train_chunks}.")
    if config.train_steps % config.train_chunks:
        raise ValueError(f"`config.train_steps`={config.train_steps} must be divisible by "
                         f"`config.train_chunks`={config.train_chunks}.")
