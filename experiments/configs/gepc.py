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
    c.msma_levels = 10
    c.msma_t_min, c.msma_t_max = 0.01, 0.5
    c.diffpath_steps = 10
    c.gmm_components = 4
    c.bootstrap = 500
    c.eval_batch = 200
    if arg == "smoke":
        c.id_dataset = "digits"  # the quick preset covers MNIST with the shipped model
        c.train_per_class, c.cal_per_class, c.test_per_class, c.num_ood = 30, 20, 8, 40
        c.clutter_cal = 40
        c.train_steps, c.train_chunks = 20, 2
        c.bootstrap = 50
        c.eval_batch = 40
        c.pretrained_dir = ""  # train the tiny model in the test's workdir
    elif arg == "full":
        c.test_per_class, c.num_ood, c.clutter_cal = 80, 400, 500
        c.bootstrap = 2000
    elif arg != "quick":
        raise ValueError(f"config arg must be smoke, quick or full, got {arg!r}.")
    return c
