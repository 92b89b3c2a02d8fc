"""Bad weights: a checkpoint in the wrong slot or an unreadable one, loaded through the
study's lookup (``experiments.dllm_models.Models``, ``experiments.lib.artifacts``)."""

import atexit
import os
import shutil
import tempfile

from experiments import dllm_models
from experiments.configs import dllm as dllm_config
from tests.bad_inputs.harness import Case

SHIPPED = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "experiments", "pretrained", "dllm")


def _root(**slots) -> str:
    """A fresh pretrained folder whose slot ``name`` holds a copy of shipped ``source``."""
    root = tempfile.mkdtemp()
    atexit.register(shutil.rmtree, root, True)
    for name, source in slots.items():
        shutil.copytree(os.path.join(SHIPPED, source), os.path.join(root, name))
    return root


def denoiser(root: str, name: str = "addition"):
    cfg = dllm_config.get_config("full")
    cfg.pretrained_dir = root
    workdir = tempfile.mkdtemp()
    atexit.register(shutil.rmtree, workdir, True)
    return dllm_models.Models(cfg, workdir).denoiser(name)


def garbage(root: str, slot: str) -> str:
    """Overwrites every data file of ``slot``'s checkpoint with bytes that are no array."""
    for folder, _, files in os.walk(os.path.join(root, slot)):
        for f in files:
            if f not in ("trained_with.json", "proposal.json"):
                with open(os.path.join(folder, f), "wb") as fh:
                    fh.write(b"not a checkpoint")
    return root


def record(root: str, slot: str, text: str) -> str:
    with open(os.path.join(root, slot, "trained_with.json"), "w") as f:
        f.write(text)
    return root


CASES = [
    Case("dllm denoiser: addition_hard's weights in addition's slot", lambda: denoiser(
        _root(addition="addition_hard")), "`config.pretrained_dir`"),
    Case("dllm denoiser: countdown's weights in sudoku's slot", lambda: denoiser(
        _root(sudoku="countdown"), "sudoku"), "`config.pretrained_dir`"),
    Case("dllm denoiser: a POKE head's weights in a denoiser's slot", lambda: denoiser(
        _root(addition="addition_poke")), "`config.pretrained_dir`"),
    Case("dllm denoiser: garbage checkpoint", lambda: denoiser(
        garbage(_root(addition="addition"), "addition")), "`config.pretrained_dir`"),
    Case("dllm denoiser: record that is not JSON", lambda: denoiser(
        record(_root(addition="addition"), "addition", "{not json")), "trained_with.json"),
    Case("dllm denoiser: record that is a list", lambda: denoiser(
        record(_root(addition="addition"), "addition", "[1, 2]")), "trained_with.json"),
]

CASES = [c._replace(name=f"weights/{c.name}") for c in CASES]
