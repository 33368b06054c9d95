"""Write tests/data/peer_grids.json: the grids of test_accountants_vs_peers.py (see _peer_grids).

    python tests/audit/make_peer_grids.py      # needs the [audit] extra; ~1 min on one core

Run it when the grid's definition (``_peer_grids.GRIDS``, ``candidates``, ``classify``) or a
peer changes; ``test_committed_peer_grids_match_the_installed_peers`` says when it must.
"""
import json
from importlib.metadata import version

import _peer_grids as G


def main():
    out = {
        "about": "Grids of tests/audit/test_accountants_vs_peers.py; written by tests/audit/make_peer_grids.py",
        "delta": G.DELTA,
        "peers": {p: version(p) for p in ("dp-accounting", "prv-accountant")},
        "grids": {name: G.build_grid(name) for name in G.GRIDS},
    }
    G.DATA.parent.mkdir(exist_ok=True)
    G.DATA.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    for name, rows in out["grids"].items():
        print(f"{name}: {sum(r['status'] == 'kept' for r in rows)} points kept of {len(rows)} candidates")
    print("wrote", G.DATA)


if __name__ == "__main__":
    main()
