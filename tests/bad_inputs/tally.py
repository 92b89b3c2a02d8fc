"""Prints the bad-input tally: ``python -m tests.bad_inputs.tally [-v] [--unchecked]``.

The summary counts the calls by outcome, by class (the ``cases_<class>.py`` file a case
comes from) and by how it runs: eagerly, or traced (inside ``jit`` / ``vmap`` / ``scan``,
in checked mode). ``--unchecked`` runs the traced calls alone with checked mode off, to
show what checked mode catches (those calls are expected to be silent without it).
"""

import logging
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from tests.bad_inputs import harness  # noqa: E402


def main(verbose: bool, unchecked: bool) -> int:
    logging.getLogger("jax._src.callback").setLevel(logging.CRITICAL)  # failed checks' logs
    cases = harness.all_cases()
    if unchecked:
        harness.CHECKED["on"] = False
        cases = [c for c in cases if harness.is_traced(c)]
    counts, rows = harness.tally(cases)
    for case, outcome, detail in rows:
        if verbose or outcome != "clear":
            print(f"{outcome:17s} {case.name}\n{'':17s} {detail}")
    mode = "checked mode off" if unchecked else "traced calls in checked mode"
    print(f"{len(rows)} bad calls ({mode}): "
          + ", ".join(f"{counts[o]} {o}" for o in harness.OUTCOMES))
    groups: dict[tuple[str, str], list[str]] = {}
    for case, outcome, _ in rows:
        how = "traced" if harness.is_traced(case) else "eager"
        groups.setdefault((case.group, how), []).append(outcome)
    print(f"{'class':15s} {'how':7s} {'calls':>5s} " + " ".join(f"{o:>5.5s}"
                                                           for o in harness.OUTCOMES))
    for (cls, how), outcomes in sorted(groups.items()):
        print(f"{cls:15s} {how:7s} {len(outcomes):5d} "
              + " ".join(f"{outcomes.count(o):5d}" for o in harness.OUTCOMES))
    return 0 if counts["clear"] == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main("-v" in sys.argv, "--unchecked" in sys.argv))
