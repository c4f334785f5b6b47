"""Print what the strict order test finds: package loops (with the edges that close them),
upward imports, units in no layer, module circles (type-only imports included).

    python -m tests.package_loops     # exit 0 when the tree is clean against LAYERS, else 1

Every kind of dependency counts (`tests/import_graph.py`): relative, deferred and type-only
imports, and modules named by string. The order is `tests/test_import_cycles.LAYERS`.
"""

from __future__ import annotations

import sys

from tests.conftest import ROOT
from tests.import_graph import check_order, describe
from tests.test_import_cycles import LAYERS


def main() -> int:
    report = check_order(ROOT, LAYERS)
    print("\n".join(describe(report, LAYERS)))
    return 0 if report.clean else 1


if __name__ == "__main__":
    sys.exit(main())
