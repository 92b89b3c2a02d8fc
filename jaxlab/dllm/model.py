"""LLaDA-architecture bidirectional transformer denoiser (flax nnx).

The LLaDA masked diffusion LM (Nie et al. 2025) is a LLaMA-style transformer without the
causal mask: pre-norm blocks with RMSNorm, rotary position embeddings (half-split
rotation), SwiGLU MLP ``ff_out(silu(ff_proj(x)) * up_proj(x))``, no biases, an untied
output head, and a reserved mask token (126336 in LLaDA-8B). The tiny task models of this
package are the same class with a small ``LLaDAConfig``; ``loading.py`` maps LLaDA
safetensors checkpoints onto it.

The forward pass returns logits and the final normed hidden states (the POKE value head
reads the latter). Attention goes through ``jaxlab.attention`` so ``attention_impl="sale"``
swaps in the SALE block-sparse kernels.

For pure-function use split the module once: ``graphdef, params = nnx.split(model)`` and
call ``apply(graphdef, params, tokens)`` inside jit/vmap/scan.

Checks: ``LLaDAConfig.__post_init__`` validates every field (positive int sizes,
``n_heads`` dividing ``d_model`` with an even head dim, ``n_kv_heads`` dividing ``n_heads``,
``mask_token_id`` inside the vocabulary, ``rope_theta`` > 0 and ``rms_norm_eps`` >= 0 finite,
``attention_impl`` in ``jaxlab.attention.IMPLS``, ``sale_tau`` >= 0, ``sale_sizes`` a
``BlockSizes``, which checks its own tiles). The forward pass checks ``tokens``: 2-D
integer dtype always (static), ids in [0, vocab_size) when concrete (out-of-range ids
would gather NaN embeddings); traced tokens inside ``jit`` are not inspected.
"""

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from jaxlab import attention as attention_lib
from jaxlab.core import validation
from jaxlab.core.types import Array
from pallas_kernels.sale.reference import BlockSizes

__all__ = ["LLaDAConfig", "RMSNorm", "rope", "Block", "LLaDA", "init", "apply", "abstract"]


@dataclasses.dataclass(frozen=True)
class LLaDAConfig:
    """Architecture hyperparameters (names follow LLaDA's ``config.json``).

    Attributes:
      vocab_size: output vocabulary (LLaDA's ``embedding_size``).
      d_model: residual width.
      n_layers: number of blocks.
      n_heads: query heads; ``d_model % n_heads == 0``.
      n_kv_heads: key/value heads (GQA when < n_heads); must divide n_heads.
      mlp_hidden_size: SwiGLU hidden width.
      mask_token_id: id of the mask token.
      rope_theta: rotary base.
      rms_norm_eps: RMSNorm epsilon.
      weight_tying: output head = embedding transpose.
      attention_impl: "dense" or "sale" (see ``jaxlab.attention``).
      sale_tau: SALE keep threshold on the Relative Attention Score.
      sale_sizes: SALE tiles and local window (``pallas_kernels.sale.reference.BlockSizes``;
        the sequence length must be a multiple of ``sale_sizes.block_q``).
      dtype: compute dtype of activations (params stay float32 unless loaded otherwise).
    """

    vocab_size: int
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 4
    mlp_hidden_size: int = 384
    mask_token_id: int = -1
    rope_theta: float = 10_000.0
    rms_norm_eps: float = 1e-5
    weight_tying: bool = False
    attention_impl: str = "dense"
    sale_tau: float = 1e-3
    sale_sizes: BlockSizes = dataclasses.field(default_factory=BlockSizes)
    dtype: Any = jnp.float32

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads",
                     "mlp_hidden_size"):
            validation.check_positive_int(name, getattr(self, name))
        for name in ("rope_theta", "rms_norm_eps", "sale_tau"):
            validation.check_finite(name, getattr(self, name))
        validation.check_in_range("rope_theta", self.rope_theta, 0.0, low_inclusive=False)
        validation.check_in_range("rms_norm_eps", self.rms_norm_eps, 0.0)
        validation.check_in_range("sale_tau", self.sale_tau, 0.0)
        validation.check_one_of("attention_impl", self.attention_impl, attention_lib.IMPLS)
        if not isinstance(self.sale_sizes, BlockSizes):
            raise ValueError("`sale_sizes` must be a pallas_kernels.sale.reference.BlockSizes, "
                             f"got {self.sale_sizes!r}.")
        if self.d_model % self.n_heads:
            raise ValueError(f"`d_model`={self.d_model} must be divisible by "
                             f"`n_heads`={self.n_heads}.")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"`n_kv_heads`={self.n_kv_heads} must divide "
                             f"`n_heads`={self.n_heads}.")
        if not -self.vocab_size <= self.mask_token_id < self.vocab_size:
            raise ValueError(f"`mask_token_id`={self.mask_token_id} outside the vocabulary "
                             f"of size {self.vocab_size}.")
        if (self.d_model // self.n_heads) % 2:
            raise ValueError("head dimension d_model / n_heads must be even for RoPE.")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def mask_id(self) -> int:
        return self.mask_token_id % self.vocab_size

    @classmethod
    def llada_8b(cls, **overrides) -> "LLaDAConfig":
        """LLaDA-8B-Base / -Instruct."""
        base = dict(vocab_size=126464, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=32,
                    mlp_hidden_size=12288, mask_token_id=126336, rope_theta=500000.0,
                    rms_norm_eps=1e-5, dtype=jnp.bfloat16)
        return cls(**{**base, **overrides})

    @classmethod
    def from_hf_config(cls, hf: dict, **overrides) -> "LLaDAConfig":
        """From a LLaDA ``config.json`` dict."""
        base = dict(
            vocab_size=hf.get("embedding_size") or hf["vocab_size"], d_model=hf["d_model"],
            n_layers=hf["n_layers"], n_heads=hf["n_heads"],
            n_kv_heads=hf.get("n_kv_heads") or hf["n_heads"],
            mlp_hidden_size=hf["mlp_hidden_size"], mask_token_id=hf.get("mask_token_id", 126336),
            rope_theta=hf.get("rope_theta", 10_000.0),
            rms_norm_eps=hf.get("rms_norm_eps", 1e-5),
            weight_tying=hf.get("weight_tying", False))
        return cls(**{**base, **overrides})


class RMSNorm(nnx.Module):
    """x / sqrt(mean(x^2) + eps) * weight, computed in float32."""

    def __init__(self, dim: int, eps: float):
        self.weight = nnx.Param(jnp.ones((dim,), jnp.float32))
        self.eps = eps

    def __call__(self, x: Array) -> Array:
        x32 = x.astype(jnp.float32)
        y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
        return (y * self.weight[...]).astype(x.dtype)


def rope(x: Array, theta: float) -> Array:
    """Rotary embedding with the half-split rotation (LLaMA / OLMo convention).

    Args:
      x: [B, N, H, D], D even.
      theta: rotary base.

    Returns:
      [B, N, H, D]: x cos(n w) + rotate_half(x) sin(n w), w_i = theta^(-2i/D).
    """
    validation.check_ndim("x", x, 4)
    n, d = x.shape[1], x.shape[-1]
    if d % 2:
        raise ValueError(f"`x` must have an even head size D (half-split rotation), got shape "
                         f"{tuple(x.shape)}.")
    inv_freq = 1.0 / theta ** (jnp.arange(0, d, 2, dtype=jnp.float32) / d)
    freqs = jnp.arange(n, dtype=jnp.float32)[:, None] * inv_freq[None]
    emb = jnp.concatenate([freqs, freqs], axis=-1)[None, :, None, :]
    x1, x2 = jnp.split(x.astype(jnp.float32), 2, axis=-1)
    rotated = jnp.concatenate([-x2, x1], axis=-1)
    return (x * jnp.cos(emb) + rotated * jnp.sin(emb)).astype(x.dtype)


def _linear(din, dout, rngs, dtype):
    return nnx.Linear(din, dout, use_bias=False, dtype=dtype, rngs=rngs,
                      kernel_init=nnx.initializers.normal(0.02))


class Block(nnx.Module):
    """Pre-norm bidirectional attention + SwiGLU block (LLaDALlamaBlock)."""

    def __init__(self, cfg: LLaDAConfig, rngs: nnx.Rngs):
        d, hd = cfg.d_model, cfg.head_dim
        self.cfg = cfg
        self.attn_norm = RMSNorm(d, cfg.rms_norm_eps)
        self.ff_norm = RMSNorm(d, cfg.rms_norm_eps)
        self.q_proj = _linear(d, cfg.n_heads * hd, rngs, cfg.dtype)
        self.k_proj = _linear(d, cfg.n_kv_heads * hd, rngs, cfg.dtype)
        self.v_proj = _linear(d, cfg.n_kv_heads * hd, rngs, cfg.dtype)
        self.attn_out = _linear(cfg.n_heads * hd, d, rngs, cfg.dtype)
        self.ff_proj = _linear(d, cfg.mlp_hidden_size, rngs, cfg.dtype)
        self.up_proj = _linear(d, cfg.mlp_hidden_size, rngs, cfg.dtype)
        self.ff_out = _linear(cfg.mlp_hidden_size, d, rngs, cfg.dtype)

    def __call__(self, x: Array) -> Array:
        cfg = self.cfg
        b, n, _ = x.shape
        h = self.attn_norm(x)
        q = self.q_proj(h).reshape(b, n, cfg.n_heads, cfg.head_dim)
        k = self.k_proj(h).reshape(b, n, cfg.n_kv_heads, cfg.head_dim)
        v = self.v_proj(h).reshape(b, n, cfg.n_kv_heads, cfg.head_dim)
        q, k = rope(q, cfg.rope_theta), rope(k, cfg.rope_theta)
        a = attention_lib.attention(
            q, k, v, impl=cfg.attention_impl, tau=cfg.sale_tau, sizes=cfg.sale_sizes)
        x = x + self.attn_out(a.reshape(b, n, -1))
        h = self.ff_norm(x)
        return x + self.ff_out(jax.nn.silu(self.ff_proj(h)) * self.up_proj(h))


class LLaDA(nnx.Module):
    """Bidirectional masked-diffusion denoiser.

    ``__call__(tokens [B, N] int) -> (logits [B, N, V] float32, hidden [B, N, d_model])``.
    """

    def __init__(self, cfg: LLaDAConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.wte = nnx.Embed(cfg.vocab_size, cfg.d_model, dtype=cfg.dtype, rngs=rngs,
                             embedding_init=nnx.initializers.normal(0.02))
        self.blocks = nnx.List([Block(cfg, rngs) for _ in range(cfg.n_layers)])
        self.ln_f = RMSNorm(cfg.d_model, cfg.rms_norm_eps)
        if not cfg.weight_tying:
            self.ff_out = _linear(cfg.d_model, cfg.vocab_size, rngs, cfg.dtype)

    def __call__(self, tokens: Array) -> tuple[Array, Array]:
        validation.check_ndim("tokens", tokens, 2)
        validation.check_int_range("tokens", tokens, 0, self.cfg.vocab_size)
        x = self.wte(tokens)
        for block in self.blocks:
            x = block(x)
        hidden = self.ln_f(x)
        if self.cfg.weight_tying:
            logits = self.wte.attend(hidden)
        else:
            logits = self.ff_out(hidden)
        return logits.astype(jnp.float32), hidden


def _check_cfg(cfg) -> None:
    if not isinstance(cfg, LLaDAConfig):
        raise TypeError(f"`cfg` must be a LLaDAConfig (LLaDAConfig.from_hf_config for a "
                        f"config.json dict), got {type(cfg).__name__}.")


def init(cfg: LLaDAConfig, *, seed: int = 0) -> tuple[nnx.GraphDef, nnx.State]:
    """A freshly initialised model as (graphdef, params)."""
    _check_cfg(cfg)
    return nnx.split(LLaDA(cfg, rngs=nnx.Rngs(seed)))


def apply(graphdef: nnx.GraphDef, params: nnx.State, tokens: Array) -> tuple[Array, Array]:
    """Pure forward pass: tokens [B, N] -> (logits [B, N, V], hidden [B, N, D])."""
    return nnx.merge(graphdef, params)(tokens)


def abstract(cfg: LLaDAConfig) -> tuple[nnx.GraphDef, nnx.State]:
    """(graphdef, ShapeDtypeStruct params) without allocating weights.

    Raises:
      TypeError: ``cfg`` is not a ``LLaDAConfig`` (a Hugging Face ``config.json`` dict goes
        through ``LLaDAConfig.from_hf_config``).
    """
    _check_cfg(cfg)
    return nnx.split(nnx.eval_shape(lambda: LLaDA(cfg, rngs=nnx.Rngs(0))))
