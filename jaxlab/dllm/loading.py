"""LLaDA safetensors checkpoints <-> ``model.LLaDA`` params.

Hugging Face LLaDA checkpoints (``GSAI-ML/LLaDA-8B-Base`` / ``-Instruct``) store torch
``Linear`` weights as [out, in] under OLMo-style names::

    model.transformer.wte.weight                       [V, D]
    model.transformer.blocks.{i}.attn_norm.weight      [D]
    model.transformer.blocks.{i}.{q,k,v}_proj.weight   [H*hd, D]
    model.transformer.blocks.{i}.attn_out.weight       [D, H*hd]
    model.transformer.blocks.{i}.ff_norm.weight        [D]
    model.transformer.blocks.{i}.ff_proj.weight        [F, D]   (SwiGLU gate, silu applied)
    model.transformer.blocks.{i}.up_proj.weight        [F, D]
    model.transformer.blocks.{i}.ff_out.weight         [D, F]
    model.transformer.ln_f.weight                      [D]
    model.transformer.ff_out.weight                    [V, D]   (absent when weight_tying)

``load_params`` reads one file, a folder with ``model.safetensors.index.json`` (sharded) or
a folder with a single ``model.safetensors``; ``save_params`` writes the same layout.
"""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxlab.dllm import model as model_lib

__all__ = ["load_params", "save_params"]

_PREFIX = "model.transformer."
_BLOCK_LINEARS = ("q_proj", "k_proj", "v_proj", "attn_out", "ff_proj", "up_proj", "ff_out")


def _names(cfg: model_lib.LLaDAConfig):
    """Yields (hf_name, path in our param tree, transpose?)."""
    yield _PREFIX + "wte.weight", ("wte", "embedding"), False
    for i in range(cfg.n_layers):
        p = f"{_PREFIX}blocks.{i}."
        yield p + "attn_norm.weight", ("blocks", i, "attn_norm", "weight"), False
        yield p + "ff_norm.weight", ("blocks", i, "ff_norm", "weight"), False
        for name in _BLOCK_LINEARS:
            yield p + name + ".weight", ("blocks", i, name, "kernel"), True
    yield _PREFIX + "ln_f.weight", ("ln_f", "weight"), False
    if not cfg.weight_tying:
        yield _PREFIX + "ff_out.weight", ("ff_out", "kernel"), True


def _files(path: str) -> list[str]:
    if os.path.isfile(path):
        return [path]
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        return [os.path.join(path, s) for s in shards]
    single = os.path.join(path, "model.safetensors")
    if os.path.exists(single):
        return [single]
    raise FileNotFoundError(f"no safetensors checkpoint at `path`={path!r} (expected a file, "
                            "model.safetensors, or model.safetensors.index.json).")


def load_params(path: str, cfg: model_lib.LLaDAConfig, dtype=None):
    """Reads a LLaDA safetensors checkpoint into (graphdef, params) for ``cfg``.

    Args:
      path: a .safetensors file or a checkpoint folder.
      cfg: the architecture (``LLaDAConfig.from_hf_config(config.json)``).
      dtype: cast every weight to this dtype (default: keep the stored dtype, bf16 -> f32
        on CPU-only installs of numpy without bfloat16 is handled by safetensors/ml_dtypes).

    Returns:
      (graphdef, params) ready for ``model.apply``.

    Raises:
      KeyError naming the missing tensors; ValueError naming a tensor with the wrong shape.
    """
    from safetensors.numpy import load_file

    tensors = {}
    for f in _files(path):
        tensors.update(load_file(f))
    graphdef, abstract = model_lib.abstract(cfg)
    missing = [n for n, _, _ in _names(cfg) if n not in tensors]
    if missing:
        raise KeyError(f"checkpoint at {path!r} lacks {len(missing)} tensors, e.g. "
                       f"{missing[:3]}; is `cfg` (n_layers={cfg.n_layers}, weight_tying="
                       f"{cfg.weight_tying}) right?")
    state = nnx.to_pure_dict(abstract)
    for name, tree_path, transpose in _names(cfg):
        leaf = state
        for k in tree_path[:-1]:
            leaf = leaf[k]
        want = leaf[tree_path[-1]]
        arr = tensors[name].T if transpose else tensors[name]
        if arr.shape != tuple(want.shape):
            raise ValueError(f"tensor {name!r} has shape {arr.shape} (after transpose: "
                             f"{transpose}) but `cfg` expects {tuple(want.shape)}.")
        leaf[tree_path[-1]] = jnp.asarray(arr, dtype or arr.dtype)
    nnx.replace_by_pure_dict(abstract, state)
    return graphdef, abstract


def save_params(params, cfg: model_lib.LLaDAConfig, path: str) -> str:
    """Writes (our) params as a LLaDA-layout safetensors file at ``path``.

    Raises:
      ValueError: ``params`` are not those of a model of ``cfg`` (a missing tensor or one
        of another shape), checked before anything is written.
    """
    from safetensors.numpy import save_file

    state = nnx.to_pure_dict(params)
    want = nnx.to_pure_dict(model_lib.abstract(cfg)[1])
    out = {}
    for name, tree_path, transpose in _names(cfg):
        leaf, expected = state, want
        for k in tree_path:
            if not isinstance(leaf, dict) or k not in leaf:
                raise ValueError(f"`params` lack the tensor {name!r} that a model of `cfg` "
                                 f"(n_layers={cfg.n_layers}, weight_tying={cfg.weight_tying}) "
                                 "has; is `cfg` the params' config?")
            leaf, expected = leaf[k], expected[k]
        if tuple(np.shape(leaf)) != tuple(expected.shape):
            raise ValueError(f"`params` tensor {name!r} has shape {tuple(np.shape(leaf))} but "
                             f"`cfg` expects {tuple(expected.shape)}.")
        arr = np.asarray(jax.device_get(leaf), np.float32)
        out[name] = np.ascontiguousarray(arr.T if transpose else arr)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    save_file(out, path)
    return path
