"""Synthetic attention inputs with block-local structure and an attention sink.

Keys come in 64-long segments of 16 orthogonal clusters (plus noise) and key 0 carries a
sink direction every query shares; each 64-query block attends to one cluster. This is
the regime SALE targets: most attention mass in a few key blocks plus the sink.

Checks: ``n``, ``q_heads``, ``kv_heads`` positive ints with ``kv_heads`` dividing ``q_heads``
(GQA), ``d`` >= 17, a floating ``dtype``.
"""

import jax
import jax.numpy as jnp

from pallas_kernels.sale import _checks


def structured_qkv(n: int = 1024, d: int = 32, q_heads: int = 4, kv_heads: int = 2, *,
                   seed: int = 0, dtype=jnp.float32):
    """(q [1, q_heads, n, d], k, v [1, kv_heads, n, d]); needs d >= 17."""
    for name, value in (("n", n), ("d", d), ("q_heads", q_heads), ("kv_heads", kv_heads)):
        _checks.check_positive_int(name, value)
    if q_heads % kv_heads:
        raise ValueError(f"`q_heads`={q_heads} must be a multiple of `kv_heads`={kv_heads} "
                         "(GQA).")
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"`dtype` must be a floating dtype, got {jnp.dtype(dtype)}.")
    if d < 17:
        raise ValueError(f"`d` must be >= 17 (16 cluster directions + a sink), got {d}.")
    ks = jax.random.split(jax.random.key(seed), 5)
    basis = jnp.linalg.qr(jax.random.normal(ks[0], (d, d)))[0]
    c, e_sink = basis[:16] * 8.0, basis[16]
    k = c[(jnp.arange(n) // 64) % 16] + 0.3 * jax.random.normal(ks[1], (kv_heads, n, d))
    k = k.at[:, 0].add(12.0 * e_sink)
    q = (c[((jnp.arange(n) // 64) * 7 + jnp.arange(q_heads)[:, None]) % 16]
         + 0.3 * jax.random.normal(ks[3], (q_heads, n, d)) + 5.0 * e_sink)
    v = jax.random.normal(ks[4], (1, kv_heads, n, d))
    return q[None].astype(dtype), k[None].astype(dtype), v.astype(dtype)
