"""LLaDA port: safetensors loading checked against an independent NumPy forward pass."""

import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import save_file

from jaxlab.dllm import loading
from jaxlab.dllm import model as model_lib
from pallas_kernels.sale.reference import BlockSizes

CFG = dict(vocab_size=40, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2,
           mlp_hidden_size=48, mask_token_id=39, rope_theta=500000.0)


def _random_hf_tensors(rng, c):
    """Random weights in the Hugging Face LLaDA layout ([out, in] linears)."""
    d, hd, f, v = c["d_model"], c["d_model"] // c["n_heads"], c["mlp_hidden_size"], c["vocab_size"]
    t = {"model.transformer.wte.weight": rng.normal(0, 0.5, (v, d)),
         "model.transformer.ln_f.weight": rng.uniform(0.5, 1.5, d),
         "model.transformer.ff_out.weight": rng.normal(0, 0.2, (v, d))}
    for i in range(c["n_layers"]):
        p = f"model.transformer.blocks.{i}."
        t[p + "attn_norm.weight"] = rng.uniform(0.5, 1.5, d)
        t[p + "ff_norm.weight"] = rng.uniform(0.5, 1.5, d)
        t[p + "q_proj.weight"] = rng.normal(0, 0.2, (c["n_heads"] * hd, d))
        t[p + "k_proj.weight"] = rng.normal(0, 0.2, (c["n_kv_heads"] * hd, d))
        t[p + "v_proj.weight"] = rng.normal(0, 0.2, (c["n_kv_heads"] * hd, d))
        t[p + "attn_out.weight"] = rng.normal(0, 0.2, (d, c["n_heads"] * hd))
        t[p + "ff_proj.weight"] = rng.normal(0, 0.2, (f, d))
        t[p + "up_proj.weight"] = rng.normal(0, 0.2, (f, d))
        t[p + "ff_out.weight"] = rng.normal(0, 0.2, (d, f))
    return {k: x.astype(np.float32) for k, x in t.items()}


def _numpy_llada(t, tokens, c, eps=1e-5):
    """Reference LLaDA forward written from the architecture description (float64)."""
    t = {k: v.astype(np.float64) for k, v in t.items()}
    nh, nkv = c["n_heads"], c["n_kv_heads"]
    hd = c["d_model"] // nh

    def rms(x, w):
        return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps) * w

    def rope(x):  # x [B, N, H, hd]
        n = x.shape[1]
        inv = 1.0 / c["rope_theta"] ** (np.arange(0, hd, 2) / hd)
        ang = np.arange(n)[:, None] * inv[None]
        cos = np.cos(np.concatenate([ang, ang], -1))[None, :, None]
        sin = np.sin(np.concatenate([ang, ang], -1))[None, :, None]
        half = hd // 2
        rot = np.concatenate([-x[..., half:], x[..., :half]], -1)
        return x * cos + rot * sin

    x = t["model.transformer.wte.weight"][tokens]
    b, n, _ = x.shape
    for i in range(c["n_layers"]):
        p = f"model.transformer.blocks.{i}."
        h = rms(x, t[p + "attn_norm.weight"])
        q = rope((h @ t[p + "q_proj.weight"].T).reshape(b, n, nh, hd))
        k = rope((h @ t[p + "k_proj.weight"].T).reshape(b, n, nkv, hd))
        v = (h @ t[p + "v_proj.weight"].T).reshape(b, n, nkv, hd)
        k, v = np.repeat(k, nh // nkv, 2), np.repeat(v, nh // nkv, 2)
        s = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(hd)  # bidirectional: no mask
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        o = np.einsum("bhqk,bkhd->bqhd", a, v).reshape(b, n, -1)
        x = x + o @ t[p + "attn_out.weight"].T
        h = rms(x, t[p + "ff_norm.weight"])
        g = h @ t[p + "ff_proj.weight"].T
        x = x + ((g / (1 + np.exp(-g))) * (h @ t[p + "up_proj.weight"].T)) @ \
            t[p + "ff_out.weight"].T
    hidden = rms(x, t["model.transformer.ln_f.weight"])
    return hidden @ t["model.transformer.ff_out.weight"].T, hidden


def test_safetensors_llada_matches_numpy_reference(tmp_path):
    rng = np.random.default_rng(0)
    tensors = _random_hf_tensors(rng, CFG)
    path = str(tmp_path / "model.safetensors")
    save_file(tensors, path)
    cfg = model_lib.LLaDAConfig(**CFG)
    graphdef, params = loading.load_params(str(tmp_path), cfg)  # folder form
    tokens = rng.integers(0, CFG["vocab_size"], (2, 11))
    logits, hidden = model_lib.apply(graphdef, params, jnp.asarray(tokens))
    want_logits, want_hidden = _numpy_llada(tensors, tokens, CFG)
    np.testing.assert_allclose(np.asarray(logits), want_logits, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(hidden), want_hidden, rtol=1e-4, atol=1e-4)


@pytest.mark.heavy
def test_save_then_load_round_trip(tmp_path):
    cfg = model_lib.LLaDAConfig(**CFG)
    graphdef, params = model_lib.init(cfg, seed=3)
    path = loading.save_params(params, cfg, str(tmp_path / "x.safetensors"))
    g2, p2 = loading.load_params(path, cfg)
    tokens = jnp.arange(14).reshape(2, 7)
    np.testing.assert_array_equal(np.asarray(model_lib.apply(graphdef, params, tokens)[0]),
                                  np.asarray(model_lib.apply(g2, p2, tokens)[0]))


def test_loading_errors_name_the_problem(tmp_path):
    cfg = model_lib.LLaDAConfig(**CFG)
    tensors = _random_hf_tensors(np.random.default_rng(0), CFG)
    save_file(tensors, str(tmp_path / "a.safetensors"))
    with pytest.raises(KeyError, match="lacks"):
        loading.load_params(str(tmp_path / "a.safetensors"),
                            model_lib.LLaDAConfig(**{**CFG, "n_layers": 3}))
    with pytest.raises(ValueError, match="q_proj"):
        bad = dict(tensors)
        bad["model.transformer.blocks.0.q_proj.weight"] = np.zeros((8, 32), np.float32)
        save_file(bad, str(tmp_path / "b.safetensors"))
        loading.load_params(str(tmp_path / "b.safetensors"), cfg)
    with pytest.raises(FileNotFoundError, match="safetensors"):
        loading.load_params(str(tmp_path / "nothing"), cfg)


def test_config_checks_and_llada_8b_facts():
    c = model_lib.LLaDAConfig.llada_8b()
    assert (c.vocab_size, c.mask_id, c.d_model, c.n_layers) == (126464, 126336, 4096, 32)
    with pytest.raises(ValueError, match="n_kv_heads"):
        model_lib.LLaDAConfig(vocab_size=10, d_model=32, n_heads=4, n_kv_heads=3)
    with pytest.raises(ValueError, match="mask_token_id"):
        model_lib.LLaDAConfig(vocab_size=10, mask_token_id=10)


@pytest.mark.heavy
def test_sale_attention_in_the_model_matches_dense():
    """jaxlab.attention's SALE kernels inside LLaDA (GQA, 4 x 4 blocks): tau = 0 keeps every
    block, so the logits equal the dense model's. (Accuracy at tau > 0 is measured on the
    sudoku denoiser by the study; approximation quality by tests/pallas_kernels.)"""
    import dataclasses

    cfg = model_lib.LLaDAConfig(**{**CFG, "d_model": 64, "n_heads": 4, "n_kv_heads": 2})
    graphdef, params = model_lib.init(cfg, seed=0)
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, 39, (2, 64)))
    dense, _ = model_lib.apply(graphdef, params, tokens)
    for tau, tol in ((0.0, 1e-5),):
        sale_cfg = dataclasses.replace(cfg, attention_impl="sale", sale_tau=tau,
                                       sale_sizes=BlockSizes(16, 16, 16))
        g2, _ = model_lib.abstract(sale_cfg)
        sparse, _ = model_lib.apply(g2, params, tokens)
        np.testing.assert_allclose(np.asarray(sparse), np.asarray(dense), atol=tol, rtol=tol)
