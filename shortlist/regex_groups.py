"""Whether a match of a pattern can leave its first group unset, read from the pattern's parse tree.

A `regex:` extraction answers with the first group of its last match; in `(-)?(\\d+)` a match of "42"
sets no group 1, and the extraction had nothing to return (screening raised in Trainee.clean). A trainee
whose pattern allows that is refused when it is made. The tree is Python's own re parser's (re._parser,
sre_parse before 3.11: private, but the one parser of re's syntax in the standard library); a pattern
only the `regex` module reads is not judged here, and an unset group still reads as no answer.
"""
from __future__ import annotations

try:
    from re import _parser
except ImportError:  # Python 3.10
    import sre_parse as _parser  # type: ignore[no-redef]

_c = _parser  # the opcode names live beside the parser in both versions
_REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT} | ({_c.POSSESSIVE_REPEAT} if hasattr(_c, "POSSESSIVE_REPEAT") else set())


def first_group_optional(source: str, flags: int = 0) -> bool | None:
    """True where some match leaves group 1 unset, False where every match sets it; None where the
    pattern has no group 1 or re cannot read it (a `regex`-only pattern)."""
    try:
        tree = _parser.parse(source, flags)
    except Exception:  # noqa: BLE001  re's parser raises several kinds on what only `regex` reads
        return None
    return _walk(tree, False)


def _walk(tree, optional: bool) -> bool | None:
    for op, av in tree.data if hasattr(tree, "data") else tree:
        found = None
        if op is _c.SUBPATTERN:
            if av[0] == 1:
                return optional
            found = _walk(av[-1], optional)
        elif op in _REPEATS:
            found = _walk(av[2], optional or av[0] == 0)
        elif op is _c.BRANCH:  # a group sits in one branch: another can match without it
            found = next((r for b in av[1] if (r := _walk(b, True)) is not None), None)
        elif op is _c.ASSERT:
            found = _walk(av[1], optional)
        elif op is _c.ASSERT_NOT:  # a group inside a negative lookaround never holds anything
            found = _walk(av[1], True)
        elif op is _c.GROUPREF_EXISTS:  # (?(n)yes|no): either side may be skipped
            found = next((r for b in av[1:] if b is not None and (r := _walk(b, True)) is not None), None)
        elif getattr(_c, "ATOMIC_GROUP", None) is op:
            found = _walk(av, optional)
        if found is not None:
            return found
    return None
