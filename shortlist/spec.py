"""One spelling for a named thing with overrides: `name` or `name(key=value, ...)`, values Python literals.

Families (`chain_sum(max_terms=2)`) and trainees (`qwen3(max_new_tokens=256)`) are both written
this way, on a command line, in `--set`, or as a papermill parameter.
"""
from __future__ import annotations

import ast

from shortlist.errors import OneLine


class SpecError(OneLine, ValueError):
    """A spec that cannot be read; the message is one line."""


def parse_call(text: str, what: str = "spec") -> tuple[str, dict]:
    """('name', {overrides}) from `name` or `name(key=value, ...)`; tuples become lists (JSON's kind)."""
    text = text.strip()
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise SpecError(f"cannot read {what} {text!r}: write name or name(key=value, ...)") from None
    if _name(node):
        return _name(node), {}
    if isinstance(node, ast.Call) and _name(node.func) and not node.args and all(kw.arg for kw in node.keywords):
        keys = [kw.arg for kw in node.keywords]
        if len(set(keys)) < len(keys):  # a dict would keep the last silently
            twice = next(k for k in keys if keys.count(k) > 1)
            raise SpecError(f"{text!r}: {twice} is given twice; give each setting once")
        try:
            config = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
        except ValueError:
            raise SpecError(f"{text!r}: settings must be Python literals (numbers, strings, lists)") from None
        return _name(node.func), {k: list(v) if isinstance(v, tuple) else v for k, v in config.items()}
    raise SpecError(f"cannot read {what} {text!r}: write name or name(key=value, ...)")


def _name(node) -> str | None:
    """`name`, or `source.name` (a family of another source): the dotted name, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def split(text: str) -> list[str]:
    """Parts of a comma-separated list, splitting only outside brackets and quotes."""
    parts, depth, start, quote = [], 0, 0, None
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        else:
            depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
            if ch == "," and depth == 0:
                parts.append(text[start:i])
                start = i + 1
    return [p for p in parts + [text[start:]] if p.strip()]


def render(name: str, config: dict) -> str:
    """The canonical spelling: parse_call(render(n, c)) == (n, c), keys sorted."""
    if not config:
        return name
    return f"{name}({', '.join(f'{k}={config[k]!r}' for k in sorted(config))})"
