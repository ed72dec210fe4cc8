"""What every notebook's first cell does: settings from its parameters, paths from the repository root.

A notebook runs with notebooks/ as its working directory when opened by hand and wherever papermill
puts it in the batch, so a relative `out` is taken from the repository root in both. A bad setting
is refused here, in one line (shortlist.errors), before anything else runs.
"""
from __future__ import annotations

import warnings
from pathlib import Path

from proof import settings as settings_

ROOT = Path(__file__).resolve().parent.parent  # the repository: notebooks/, proof/, shortlist/


def start(namespace: dict) -> settings_.Settings:
    """Settings from a notebook's globals (its parameters cell, after papermill's injection). Called
    before anything imports transformers, so that the kernel's warning filter is in place first."""
    # tqdm.auto, which transformers imports, warns in a Jupyter kernel without ipywidgets that it cannot
    # draw widget bars; every progress bar is off in this project, so it would only add noise to each notebook
    warnings.filterwarnings("ignore", message="IProgress not found")
    values = {name: namespace[name] for name in settings_.names() if name in namespace}
    out = values.get("out")  # an empty out is refused by make(), not taken for the repository root
    if isinstance(out, str) and out.strip() and not Path(out).expanduser().is_absolute():
        values["out"] = str(ROOT / values["out"])
    return settings_.make(**values)
