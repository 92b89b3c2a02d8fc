"""Plain NumPy two-point optimistic OGD on a ball: the independent reference and the
benchmark baseline. Same update as ``learners.two_point`` given the same directions.

Checks: ``centers`` [T, d] finite, ``radius`` > 0, 0 < ``delta`` < ``radius``, ``scale`` > 0,
``directions`` [T, d] unit vectors, ``x0`` [d] inside the ball.
"""

import numpy as np

from jaxlab.core import validation


def two_point_ogd_numpy(centers, curvature, radius, delta, scale, directions,
                        optimistic=True, x0=None):
    """Runs the two-point learner on f_t(x) = curvature/2 ||x - centers[t]||^2 over a
    centred ball of ``radius``.

    Args:
      centers: [T, d] loss centres.
      curvature: scalar a.
      radius: ball radius R (inner radius r = R).
      delta: exploration radius.
      scale: step scale D in eta_t = D / sqrt(1 + S_t).
      directions: [T, d] unit vectors u_t.
      optimistic: hint g_{t-1} (else 0).
      x0: [d] start (zeros by default).

    Returns:
      (losses [T], played points [T, d]).
    """
    centers = np.asarray(centers, np.float64)
    validation.check_ndim("centers", centers, 2)
    validation.check_finite("centers", centers)
    t_max, d = centers.shape
    validation.check_in_range("radius", radius, 0.0, low_inclusive=False)
    validation.check_in_range("delta", delta, 0.0, radius, low_inclusive=False,
                              high_inclusive=False)
    validation.check_in_range("scale", scale, 0.0, low_inclusive=False)
    validation.check_shape("directions", directions, (t_max, d))
    norms = np.linalg.norm(np.asarray(directions, np.float64), axis=1)
    if not np.allclose(norms, 1.0, atol=1e-5):
        raise ValueError(f"`directions` must be unit vectors, got norms in "
                         f"[{norms.min():.4g}, {norms.max():.4g}].")
    if x0 is not None:
        validation.check_shape("x0", x0, (d,))
        if np.linalg.norm(x0) > radius * (1 + 1e-5):
            raise ValueError(f"`x0` must lie in the ball of radius {radius:g}.")
    r_play = radius * (1.0 - delta / radius)

    def proj(x):
        n = np.linalg.norm(x)
        return x if n <= r_play else x * (r_play / n)

    def f(t, x):
        return 0.5 * curvature * np.sum((x - centers[t]) ** 2)

    xhat = proj(np.zeros(d) if x0 is None else np.asarray(x0, np.float64))
    prev_g = np.zeros(d)
    sum_var = 0.0
    out_loss, out_x = np.zeros(t_max), np.zeros((t_max, d))
    for t in range(t_max):
        m = prev_g if optimistic else np.zeros(d)
        eta = scale / np.sqrt(1.0 + sum_var)
        x = proj(xhat - eta * m)
        u = directions[t]
        fp, fm = f(t, x + delta * u), f(t, x - delta * u)
        g = d * (fp - fm) / (2.0 * delta) * u
        xhat = proj(xhat - eta * g)
        sum_var += np.sum((g - m) ** 2)
        prev_g = g
        out_loss[t], out_x[t] = 0.5 * (fp + fm), x
    return out_loss, out_x
