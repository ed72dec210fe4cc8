"""Refusals whose message is the whole story.

Every check that refuses bad input (an unknown family, a missing model, predictions that do not
verify...) raises a subclass of OneLine with one line that says what is wrong and what to do. The
command lines print it as `error: <line>`; IPython, and so Jupyter and papermill, shows
_render_traceback_() in place of a traceback, so Run All by hand shows the same line.
"""
from __future__ import annotations


class OneLine(Exception):
    # the command lines' exit status: 2 for a refusal of the input (argparse's own for a bad flag); a
    # failure while the work runs (a full disk) says 1, as a family that failed does
    exit_code = 2

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


def one_line(e: BaseException, limit: int = 300) -> str:
    """An exception as one line: a OneLine's own message, else its type and the first line of its text."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return (text if isinstance(e, OneLine) else f"{type(e).__name__}: {text}".rstrip(": "))[:limit]
