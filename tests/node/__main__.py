"""`python -m tests.node down`: tear down a node whose run died without doing it (state.json);
`python -m tests.node leftovers`: what a node left behind (nothing, after a teardown)."""

from __future__ import annotations

import sys

from tests.node.node import RUN
from tests.node.teardown import leftovers, teardown_state


def main() -> int:
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "down":
        teardown_state(RUN)
        left = leftovers()
        print("\n".join(left) or "nothing left behind")
        return 1 if left else 0
    if what == "leftovers":
        left = leftovers()
        print("\n".join(left) or "nothing left behind")
        return 1 if left else 0
    print("usage: python -m tests.node down|leftovers", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
