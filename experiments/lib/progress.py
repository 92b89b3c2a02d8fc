"""Progress reporting with rates: one updating line on a terminal, occasional log lines
elsewhere.

On a TTY a bar redraws one line in place (carriage return) and is erased when its work is
done, so the console keeps only what a run says (each method's start and result lines).
Elsewhere (CI, pod logs, a file) a bar writes an absl INFO line at most every
``log_every_s`` seconds, the first one ``log_every_s`` after it starts, so work shorter than
that prints nothing, and a bar that printed ends with its final count. The environment
variable ``JAXLAB_PROGRESS_EVERY_S`` sets that default interval (``0``: a line per update).
"""

import os
import sys
import time

from absl import logging
from tqdm.auto import tqdm

from jaxlab.core import sharding


def _on_tty() -> bool:
    return sys.stderr.isatty()


def _every_s(log_every_s: float | None) -> float:
    """``log_every_s``, or ``JAXLAB_PROGRESS_EVERY_S`` (default 10 s) when None."""
    if log_every_s is not None:
        return log_every_s
    return float(os.environ.get("JAXLAB_PROGRESS_EVERY_S", "10"))


class Progress:
    """Counts work units and reports the rate.

    On a TTY it draws a tqdm bar (erased when closed); otherwise it writes an absl INFO
    line at most every ``log_every_s`` seconds with done/total and units per second (none
    for work that ends sooner). In a multi-host run only the main process reports.

    Args:
      total: number of units in the whole run.
      desc: label.
      unit: the unit's name ("updates", "rounds", ...).
      initial: units already done (e.g. restored from a checkpoint).
      log_every_s: minimum seconds between log lines (and before the first) when not on a
        TTY (None: ``JAXLAB_PROGRESS_EVERY_S``, default 10).
    """

    def __init__(self, total: int, desc: str, unit: str = "it", initial: int = 0,
                 log_every_s: float | None = None):
        self.total, self.desc, self.unit = total, desc, unit
        self.done = initial
        self._start_done = initial
        self._t0 = time.perf_counter()
        self._last_log = self._t0
        self._logged = False
        self._log_every_s = _every_s(log_every_s)
        self._bar = None
        self._quiet = not sharding.is_main_process()
        if _on_tty() and not self._quiet:
            self._bar = tqdm(total=total, initial=initial, desc=desc, unit=unit,
                             unit_scale=True, dynamic_ncols=True, leave=False)

    @property
    def rate(self) -> float:
        """Units per second since this reporter started (restored units excluded)."""
        dt = time.perf_counter() - self._t0
        return (self.done - self._start_done) / dt if dt > 0 else 0.0

    def update(self, n: int = 1, postfix: str | None = None) -> None:
        self.done += n
        if self._quiet:
            return
        if self._bar is not None:
            self._bar.update(n)
            if postfix:
                self._bar.set_postfix_str(postfix)
            return
        now = time.perf_counter()
        if (now - self._last_log >= self._log_every_s
                or (self._logged and self.done >= self.total)):
            self._last_log, self._logged = now, True
            logging.info("%s: %d/%d %s (%.3g %s/s)%s", self.desc, self.done, self.total,
                         self.unit, self.rate, self.unit, f" {postfix}" if postfix else "")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def comparison_reporter(log_every_s: float | None = None):
    """A ``progress(done, total, description)`` callable for ``jaxlab.core.protocol.compare``
    (and every method's ``compare``).

    A comparison reports many short phases (one per grid point tuned, one per contender
    tested); they share one line: on a TTY one bar, redrawn with each phase's description
    and erased at the end of each; elsewhere an absl INFO line at most every
    ``log_every_s`` seconds over all phases (none for a comparison that ends sooner).
    """
    log_every_s = _every_s(log_every_s)
    state = {"bar": None, "desc": None, "last": time.perf_counter()}
    quiet = not sharding.is_main_process()

    def report(done: int, total: int, desc: str) -> None:
        if quiet:
            return
        if _on_tty():
            bar = state["bar"]
            if bar is None or state["desc"] != desc:
                if bar is not None:
                    bar.close()
                bar = state["bar"] = tqdm(total=total, desc=desc, unit="items",
                                          dynamic_ncols=True, leave=False)
                state["desc"] = desc
            bar.update(done - bar.n)
            if done >= total:
                bar.close()
                state["bar"] = state["desc"] = None
            return
        now = time.perf_counter()
        if now - state["last"] >= log_every_s:
            state["last"] = now
            logging.info("%s: %d/%d items", desc, done, total)

    return report
