"""Prints the bad-input tally: ``python -m tests.bad_inputs.tally [-v]``.

The summary counts the calls by outcome, by class (the ``cases_<class>.py`` file a case
comes from) and by how it runs: eagerly, or traced (inside ``jit`` / ``vmap`` / ``scan``,
in checked mode).
"""

import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from tests.bad_inputs import harness  # noqa: E402


def main(verbose: bool) -> int:
    counts, rows = harness.tally(harness.all_cases())
    for case, outcome, detail in rows:
        if verbose or outcome != "clear":
            print(f"{outcome:17s} {case.name}\n{'':17s} {detail}")
    print(f"{len(rows)} bad calls: " + ", ".join(f"{counts[o]} {o}" for o in harness.OUTCOMES))
    groups: dict[tuple[str, str], list[str]] = {}
    for case, outcome, _ in rows:
        how = "traced" if harness.is_traced(case) else "eager"
        groups.setdefault((case.group, how), []).append(outcome)
    print(f"{'class':10s} {'how':7s} {'calls':>5s} {'clear':>5s}")
    for (cls, how), outcomes in sorted(groups.items()):
        print(f"{cls:10s} {how:7s} {len(outcomes):5d} {outcomes.count('clear'):5d}")
    return 0 if counts["clear"] == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main("-v" in sys.argv))
