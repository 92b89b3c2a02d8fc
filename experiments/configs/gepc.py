"""Configs for experiments/gepc.py and gepc_train.py: get_config("smoke" | "quick" | "full")."""

import ml_collections


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
