"""Phase (1) of bench/load.py alone: one child under many concurrent MCP clients.

    python bench/child_load.py [--clients 50] [--seconds 60] [--only read|grep|bash]

Runs load.py's own `child_under_load` (same workload, same figures) without
the daemon phase, so a change to the child can be measured in a minute.
`--only TOOL` keeps just that tool's calls of the mix (read: the HTTP and
pipeline path without any subprocess).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import load

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--only", choices=sorted({name for name, _ in load.CALLS}))
    args = parser.parse_args()
    if args.only:
        load.CALLS[:] = [call for call in load.CALLS if call[0] == args.only]
    trio.run(load.child_under_load, args.clients, args.seconds)
