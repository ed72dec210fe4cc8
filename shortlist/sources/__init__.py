"""Where environments come from: a registry of sources (source.py), Reasoning Gym the built-in one
(reasoning_gym.py), families with their tasks (family.py, tasks.py) and difficulty levels (levels.py)."""
from shortlist.sources.family import (DEFAULT, Family, FamilyError, check_name, creatable, fingerprint,  # noqa: F401
                                      parse, parse_list)
