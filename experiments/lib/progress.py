"""Progress reporting with rates: a tqdm bar on a terminal, absl log lines elsewhere."""

import sys
import time

from absl import logging
from tqdm.auto import tqdm

from jaxlab.core import sharding


class Progress:
    """Counts work units and reports the rate.

    On a TTY it draws a tqdm bar; otherwise (CI, pod logs) it writes an absl INFO line
    at most every ``log_every_s`` seconds with done/total and units per second. In a
    multi-host run only the main process reports.

    Args:
      total: number of units in the whole run.
      desc: label.
      unit: the unit's name ("updates", "rounds", ...).
      initial: units already done (e.g. restored from a checkpoint).
      log_every_s: minimum seconds between log lines when not on a TTY.
    """

    def __init__(self, total: int, desc: str, unit: str = "it", initial: int = 0,
                 log_every_s: float = 10.0):
        self.total, self.desc, self.unit = total, desc, unit
        self.done = initial
        self._start_done = initial
        self._t0 = time.perf_counter()
        self._last_log = -float("inf")
        self._log_every_s = log_every_s
        self._bar = None
        self._quiet = not sharding.is_main_process()
        if sys.stderr.isatty() and not self._quiet:
            self._bar = tqdm(total=total, initial=initial, desc=desc, unit=unit,
                             unit_scale=True, dynamic_ncols=True)

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
        if now - self._last_log >= self._log_every_s or self.done >= self.total:
            self._last_log = now
            logging.info("%s: %d/%d %s (%.3g %s/s)%s", self.desc, self.done, self.total,
                         self.unit, self.rate, self.unit, f" {postfix}" if postfix else "")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def comparison_reporter(log_every_s: float = 10.0):
    """A ``progress(done, total, description)`` callable for ``jaxlab.core.protocol.compare``
    (and every method's ``compare``) that reports each phase through a ``Progress`` (a tqdm
    bar on a terminal, absl lines in logs), as the binaries report everything else."""
    bars: dict[str, Progress] = {}

    def report(done: int, total: int, desc: str) -> None:
        bar = bars.get(desc)
        if bar is None:
            bar = bars[desc] = Progress(total, desc, unit="items", log_every_s=log_every_s)
        bar.update(done - bar.done)
        if done >= total:
            bar.close()
            del bars[desc]

    return report
