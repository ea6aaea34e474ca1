#!/usr/bin/env python3
"""The mutation score per file, from cargo-mutants' outcomes (see scripts/mutants.sh).

    scripts/mutants-score.py                       mutants.out/outcomes.json
    scripts/mutants-score.py A/outcomes.json B/…   several runs (shards, files run apart), merged

Prints a markdown table: per file, how many mutants ran and how each ended. "caught" and
"timeout" are both detected (a mutant that hangs the oracle is caught by its timeout);
"unviable" did not build; "missed" survived every test and wants a test, a schedule, or a
comment beside the code saying why it cannot matter. The missed ones are listed below the
table. A mutant run twice (in two of the files given) counts once, by its last outcome.
"""

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

OUTCOMES = {
    "CaughtMutant": "caught",
    "Timeout": "timeout",
    "Unviable": "unviable",
    "MissedMutant": "missed",
}


def main(paths: list[str]) -> int:
    if not paths:
        paths = [str(Path(__file__).resolve().parent.parent / "mutants.out" / "outcomes.json")]
    last: dict[str, tuple[str, str]] = {}
    for path in paths:
        try:
            outcomes = json.loads(Path(path).read_text())["outcomes"]
        except (OSError, ValueError, KeyError) as error:
            print(f"mutants-score: cannot read {path}: {error}", file=sys.stderr)
            return 2
        for outcome in outcomes:
            scenario = outcome.get("scenario")
            if not isinstance(scenario, dict) or "Mutant" not in scenario:
                continue  # the unmutated baseline
            mutant = scenario["Mutant"]
            last[mutant["name"]] = (mutant["file"], OUTCOMES.get(outcome["summary"], "other"))
    per_file: dict[str, Counter] = defaultdict(Counter)
    for file, ended in last.values():
        per_file[file][ended] += 1
    columns = ["caught", "timeout", "unviable", "missed"]
    print("| file | mutants | " + " | ".join(columns) + " |")
    print("|---|---:|" + "---:|" * len(columns))
    total: Counter = Counter()
    for file in sorted(per_file):
        counts = per_file[file]
        total.update(counts)
        cells = " | ".join(str(counts[column]) for column in columns)
        print(f"| `{file}` | {sum(counts.values())} | {cells} |")
    cells = " | ".join(f"**{total[column]}**" for column in columns)
    print(f"| **all** | **{sum(total.values())}** | {cells} |")
    missed = sorted(name for name, (_, ended) in last.items() if ended == "missed")
    if missed:
        print("\nmissed:")
        for name in missed:
            print(f"- {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
