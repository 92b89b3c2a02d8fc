"""The RFO study's init and chunk programs through the exported-program cache: the same
unit results with the cache off, on a fresh cache (exported) and on a filled one (loaded)."""

import os

import numpy as np
import pytest

pytest.importorskip("brax")

from experiments import rfo as experiment  # noqa: E402
from experiments.configs import rfo as rfo_cfg  # noqa: E402
from experiments.lib import exported  # noqa: E402


# Three smoke-size RFO runs (MJX programs: minutes of compile on a 2-core CPU): -m slow.
@pytest.mark.slow
def test_unit_results_are_identical_with_and_without_exported_programs(tmp_path,
                                                                        monkeypatch):
    cfg = rfo_cfg.get_config("smoke")
    sources = []
    load_or_export = exported.load_or_export

    def spy(*args, **kwargs):
        program = load_or_export(*args, **kwargs)
        sources.append((kwargs["name"], program.source))
        return program

    monkeypatch.setattr(exported, "load_or_export", spy)
    runs = {}
    for label, folder in (("off", None), ("exported", str(tmp_path)),
                          ("loaded", str(tmp_path))):
        monkeypatch.setattr(exported, "folder", lambda folder=folder: folder)
        runs[label] = experiment.run_method(cfg, "pendulum", "rfo")
    names = ["rfo.pendulum_rfo.init", "rfo.pendulum_rfo.chunk"]
    assert sources == [(n, s) for s in ("traced", "exported", "loaded") for n in names]
    assert sorted(f.split("-")[0] for f in os.listdir(tmp_path)) == sorted(names)
    for label in ("exported", "loaded"):
        for field in ("eval_return", "train_reward", "nonfinite_grad_updates", "env_steps"):
            a, b = np.asarray(runs["off"][field]), np.asarray(runs[label][field])
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), (label, field)
