"""The privacy-utility curves of the toolbox gallery for diffprivlib and dpfast: every experiment
of ``examples/_toolbox.py`` (NB, k-means, PCA, SSP regression, tools mean/var, random forest and
single random tree) at epsilon 0.1 / 0.3 / 1 / 3 / 10, seeds 0-9; writes diffprivlib's values to
``benchmarks/results/toolbox_curves.csv`` (the gallery plots them when diffprivlib is not
importable: the docs extra does not install it) and prints both libraries' medians.

Run:  PYTHONPATH=. DPFAST_NUM_THREADS=1 python benchmarks/bench_toolbox_curves.py [--dpl /tmp/dpl_site]
      [--families forest,tree]

``--families`` runs only the named families and replaces only their rows of the CSV; the other
families' lines are copied through byte for byte.

diffprivlib 0.6.6 (``pip install --target /tmp/dpl_site diffprivlib==0.6.6``) is appended to
``sys.path`` (after the venv's site-packages, so the venv's scikit-learn and NumPy win); its
forest module imports dtype constants newer scikit-learn no longer exports, supplied by _peers.py for the
import only (unused by the models run).
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import time

import numpy as np

from _peers import import_diffprivlib

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dpl", default="/tmp/dpl_site")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--families", default=None, help="comma-separated; default: every family")
    args = p.parse_args()
    diffprivlib = import_diffprivlib(args.dpl)
    sys.path.insert(0, os.path.join(HERE, os.pardir, "examples"))
    import dpfast

    import _toolbox

    seeds = range(args.seeds)
    rows = []
    print(f"diffprivlib {diffprivlib.__version__}; median over {args.seeds} seeds; epsilons {_toolbox.EPSILONS}")
    families = _toolbox.FAMILIES if args.families is None else tuple(args.families.split(","))
    unknown = set(families) - set(_toolbox.FAMILIES)
    if unknown:
        raise SystemExit(f"unknown families {sorted(unknown)}; known: {_toolbox.FAMILIES}")
    for fam in families:
        t = time.time()
        theirs = _toolbox.curve(fam, diffprivlib, seeds)
        ours = _toolbox.curve(fam, dpfast, seeds)
        for i, e in enumerate(_toolbox.EPSILONS):
            for j, s in enumerate(seeds):
                rows.append((fam, e, s, repr(float(theirs[i, j]))))
        print(f"{fam:12s} {_toolbox.METRIC[fam]}  ({time.time() - t:.1f} s)")
        print("   dpfast      " + "  ".join(f"{v:10.4g}" for v in np.median(ours, axis=1)))
        print("   diffprivlib " + "  ".join(f"{v:10.4g}" for v in np.median(theirs, axis=1)), flush=True)
    out = os.path.join(HERE, "results", "toolbox_curves.csv")
    kept = {}  # family -> its lines as they are in the file (CRLF included), for the families not run
    if args.families is not None and os.path.exists(out):
        with open(out, newline="") as fh:
            lines = fh.readlines()
        for line in lines[1:]:
            fam = line.split(",", 1)[0]
            if fam not in families:
                kept.setdefault(fam, []).append(line)
    new = {}
    for r in rows:
        new.setdefault(r[0], []).append(r)
    with open(out, "w", newline="") as fh:
        w = csv.writer(fh)  # lines end in "\r\n", the csv module's default, as the kept ones do
        w.writerow(["family", "epsilon", "seed", "value"])
        for fam in list(_toolbox.FAMILIES) + sorted(set(kept) - set(_toolbox.FAMILIES)):
            if fam in new:
                w.writerows(new[fam])
            else:
                fh.writelines(kept.get(fam, []))
    print(f"wrote {out} ({len(rows)} rows of {', '.join(families)}; the other families' rows kept)")


if __name__ == "__main__":
    main()
