"""What every notebook's first cell does: settings from its parameters, paths from the repository
root, and one-line errors.

A notebook runs with notebooks/ as its working directory when opened by hand and wherever papermill
puts it in the batch, so a relative `out` is taken from the repository root in both. A refusal the
library words in one line (a bad setting, a missing model, predictions that do not verify) is shown
as that line, not as a screen of traceback.
"""
from __future__ import annotations

import sys
from pathlib import Path

from proof import settings as settings_

ROOT = Path(__file__).resolve().parent.parent  # the repository: notebooks/, proof/, shortlist/


def one_line_errors() -> tuple:
    """The exceptions whose message is the whole story."""
    from proof.commit import CommitError
    from proof.files import OutputError
    from shortlist.families import FamilyError
    from shortlist.sampling import ModelError
    from shortlist.trainee import TraineeError
    return settings_.SettingsError, CommitError, OutputError, FamilyError, ModelError, TraineeError


def start(namespace: dict) -> settings_.Settings:
    """Settings from a notebook's globals (its parameters cell, after papermill's injection)."""
    shell = namespace.get("get_ipython", lambda: None)()
    if shell is not None:
        def short(self, etype, value, tb, tb_offset=None):
            print(f"error: {value}", file=sys.stderr)
            return [f"{etype.__name__}: {value}"]
        shell.set_custom_exc(one_line_errors(), short)
    values = {name: namespace[name] for name in settings_.names() if name in namespace}
    if isinstance(values.get("out"), str) and not Path(values["out"]).expanduser().is_absolute():
        values["out"] = str(ROOT / values["out"])
    return settings_.make(**values)
