"""The executors' refusals: one line each."""
from shortlist.errors import OneLine


RAY = "ray==2.60.0"  # pyproject's extra `ray`


class PlacementError(OneLine, ValueError):
    """Jobs that cannot be placed as asked (a flag, a missing Ray, a cluster without GPUs); one line."""


def needs_ray() -> PlacementError:
    return PlacementError(f"--executor ray needs Ray, an optional extra: pip install '.[ray]' in this repository "
                          f"(or pip install '{RAY}')")
