"""Plain NumPy periodic Q-learning: an independent reference and the benchmark baseline.

Same algorithm and the same use of the uniforms as ``periodic_q.build_kernel`` so that,
fed identical uniforms, both produce the same Q (up to float rounding).
"""

import numpy as np


def periodic_q_learning_numpy(transitions, rewards, gamma, period_fn, uniforms,
                              sampling="generative", step_power=1.0, step_scale=1.0, q0=None,
                              start_state=0, sgd_xi=None, bernoulli=False):
    """Runs len(uniforms) SGD steps with a Python loop.

    Args:
      transitions: [S, A, S] P(s'|s, a).
      rewards: [S, A].
      gamma: discount.
      period_fn: n -> K_n (Python int).
      uniforms: [T, 3] uniforms in [0, 1) (pair or action, next state, reward).
      sampling: "generative" or "trajectory".
      step_power, step_scale: alpha(c) = min(1, step_scale * c^-step_power), c = visits.
      sgd_xi: if given, the SGD step alpha_k = min(1, step_scale / (xi (k + 2 / xi))) on
        the inner clock k instead (step_power ignored).
      bernoulli: sample the reward as 1[u_2 < r(s, a)].
      q0: [S, A] initial Q (zeros by default).
      start_state: first state of the behaviour trajectory.

    Returns:
      dict with q, target, outer_iter.
    """
    p = np.asarray(transitions, np.float32)
    r = np.asarray(rewards, np.float32)
    n_s, n_a = r.shape
    cdf = np.cumsum(p, axis=-1)
    q = np.zeros((n_s, n_a), np.float32) if q0 is None else np.array(q0, np.float32)
    target = q.copy()
    visits = np.zeros((n_s, n_a), np.int64)
    inner, outer, s_env = 0, 0, start_state
    period = period_fn(0)
    for u0, u1, u2 in np.asarray(uniforms, np.float32):
        if sampling == "generative":
            pair = min(int(u0 * n_s * n_a), n_s * n_a - 1)
            s, a = divmod(pair, n_a)
        else:
            s, a = s_env, min(int(u0 * n_a), n_a - 1)
        row = cdf[s, a]
        s_next = min(int(np.searchsorted(row, u1 * row[-1], side="right")), n_s - 1)
        reward = float(u2 < r[s, a]) if bernoulli else r[s, a]
        y = reward + gamma * target[s_next].max()
        visits[s, a] += 1
        if sgd_xi is None:
            alpha = min(1.0, step_scale * visits[s, a] ** (-step_power))
        else:
            alpha = min(1.0, step_scale / (sgd_xi * (inner + 2.0 / sgd_xi)))
        q[s, a] += alpha * (y - q[s, a])
        inner += 1
        if inner >= period:
            target = q.copy()
            visits[:] = 0
            inner = 0
            outer += 1
            period = period_fn(outer)
        s_env = s_next
    return {"q": q, "target": target, "outer_iter": outer}
