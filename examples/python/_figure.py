"""What the example scripts share (not an example itself): their command line, and writing
the figure (to docs/img by default, or --out DIR) and showing it (--show)."""

from __future__ import annotations

import argparse
import os
from typing import Any, Tuple


def setup(doc: str) -> Tuple[argparse.Namespace, Any]:
    """Parses --out / --show (the description is the first line of `doc`) and returns the
    arguments and matplotlib.pyplot, headless unless --show."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "docs", "img"))
    ap.add_argument("--show", action="store_true", help="open a window instead of only writing the PNG")
    args = ap.parse_args()
    import matplotlib

    if not args.show:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return args, plt


def save(fig: Any, args: argparse.Namespace, name: str) -> str:
    """Lays the figure out and writes it as args.out/name; returns the path."""
    fig.tight_layout()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, name)
    fig.savefig(path, dpi=90)
    return path


def finish(path: str, args: argparse.Namespace, plt: Any) -> int:
    """Says where the figure went and shows it with --show; the script's exit status."""
    print("wrote", os.path.normpath(path))
    if args.show:
        plt.show()
    return 0
