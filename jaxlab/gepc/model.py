"""A small UNet noise-prediction model (flax linen) for square grayscale images.

Why linen while the other jaxlab models are flax nnx: the quick / full presets use the
shipped weights in ``experiments/pretrained/gepc_mnist16`` (an orbax checkpoint of this
module's linen params tree, part of the code version and of the published numbers). An nnx
port would have to convert those weights bit-exactly and re-verify every AUROC, and its
parameter initialisation from the key would differ from linen's, changing the smoke
preset's (trained from scratch) numbers. A retrained, reshipped score model is the natural
point to move this module to nnx. Callers only see
``train.make_eps_fn(model, params) -> eps_fn(x, t)``, which the move would keep.
"""

import flax.linen as nn
import jax.numpy as jnp

__all__ = ["timestep_embedding", "ResBlock", "UNet"]


def timestep_embedding(t, dim: int):
    """Sinusoidal embedding of continuous t in [0, 1]: [B] -> [B, dim]."""
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2 or dim % 2:
        raise ValueError(f"`dim` must be an even integer >= 2 (sin and cos halves), got {dim!r}.")
    half = dim // 2
    freqs = jnp.exp(-jnp.log(10_000.0) * jnp.arange(half) / half)
    ang = 1000.0 * t[:, None] * freqs[None]
    return jnp.concatenate([jnp.sin(ang), jnp.cos(ang)], axis=-1)


class ResBlock(nn.Module):
    channels: int

    @nn.compact
    def __call__(self, x, temb):
        h = nn.Conv(self.channels, (3, 3))(nn.silu(nn.GroupNorm(num_groups=8)(x)))
        h = h + nn.Dense(self.channels)(temb)[:, None, None, :]
        h = nn.Conv(self.channels, (3, 3))(nn.silu(nn.GroupNorm(num_groups=8)(h)))
        skip = x if x.shape[-1] == self.channels else nn.Conv(self.channels, (1, 1))(x)
        return h + skip


class UNet(nn.Module):
    """eps_theta(x_t, t): [B, H, W, C], [B] -> [B, H, W, C]; H, W divisible by 4."""

    channels: tuple[int, ...] = (32, 64, 64)

    @nn.compact
    def __call__(self, x, t):
        temb = nn.Dense(128)(nn.silu(nn.Dense(128)(timestep_embedding(t, 64))))
        h = nn.Conv(self.channels[0], (3, 3))(x)
        skips = []
        for i, c in enumerate(self.channels):
            h = ResBlock(c)(h, temb)
            skips.append(h)
            if i < len(self.channels) - 1:
                h = nn.avg_pool(h, (2, 2), (2, 2))
        h = ResBlock(self.channels[-1])(h, temb)
        for i, c in reversed(list(enumerate(self.channels))):
            h = ResBlock(c)(jnp.concatenate([h, skips[i]], -1), temb)
            if i > 0:
                b, hh, ww, ch = h.shape
                h = jnp.repeat(jnp.repeat(h, 2, 1), 2, 2)
        h = nn.silu(nn.GroupNorm(num_groups=8)(h))
        return nn.Conv(x.shape[-1], (3, 3), kernel_init=nn.initializers.zeros)(h)
