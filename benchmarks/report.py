"""Where a benchmark's result goes: benchmarks/results/<benchmark>.json (not committed, not built)."""

import json
import os

from tests import collection_path


def write(result):
    """Write ``result`` ({"benchmark", "figures", "ratio", "goal"}) to benchmarks/results/<benchmark>.json."""
    out = os.path.join(collection_path.REPO, "benchmarks", "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "%s.json" % result["benchmark"]), "w") as handle:
        json.dump(result, handle, indent=2)
