"""What a Reasoning Gym question means: the key the proof reserves it by (proof/heldout.py), so that no
evaluation question's twin is trained on.

Some families write one question in several ways: a product's factors in either order ("3 * 7", "7 * 3"),
one Go board or date under another of the family's templates (tsumego, calendar_arithmetic), the words of
one sentence scrambled anew (sentence_reordering). Reserving the question's text sets one of them aside for
evaluation and trains on its twin. A family registered here is reserved by its meaning instead: a small
function of the entry Reasoning Gym made (its question and metadata: the metadata shows what the text alone
may not, such as a board behind a template) returning what the question asks in a canonical form. Its gold
answer is put beside it (key()), so that a canonical form that merged two questions by mistake still keeps
apart two whose answers differ. A family not registered is reserved by its question's text, case and
whitespace aside (QUESTION), as every family was before.

Each function has a version, recorded with the reservation it drew (name()): a function that changes takes
a new version, so a commitment's key is never read under a newer meaning. What is not keyed (noticed, left):
questions that differ only by a name (aiw's "Alice" or "Barbara", simple_equations' variable letter), and a
caesar_cipher clear text enciphered under another rotation (a different question with the same answer).
"""
from __future__ import annotations

import ast
import json
from collections.abc import Callable

from shortlist.errors import OneLine

QUESTION = "question"  # the key of a family not registered: its question's text, case and whitespace aside
BOOKKEEPING = ("source_dataset", "source_index", "difficulty")  # metadata that says nothing of the question


class MeaningError(OneLine, ValueError):
    """A task its family's key function cannot read, or a key that is none (tasks.py); one line."""


def normalized(question: str) -> str:
    """The question's text, case and whitespace aside: the key of a family not registered."""
    return " ".join(question.lower().split())


KEYS: dict[str, tuple[int, Callable[[dict, dict], object]]] = {}  # family -> (version, meant(entry, config))


def register(family: str, version: int = 1):
    """Register meant(entry, config) -> a JSON value: what a family's question asks, canonically."""
    def add(meant):
        KEYS[family] = (version, meant)
        return meant
    return add


def name(family: str) -> str:
    """Which key a family's questions are reserved by: "products/1", or QUESTION (the text)."""
    return f"{family}/{KEYS[family][0]}" if family in KEYS else QUESTION


def key(family: str, config: dict, entry: dict) -> str:
    """The key of a registered family's entry: its canonical question beside its gold answer, as JSON.
    Raises where the function cannot read the entry (tasks.py says so in one line)."""
    meant = KEYS[family][1](entry, config)
    if meant in (None, "", [], {}):
        raise ValueError(f"an empty key ({meant!r})")
    return json.dumps([meant, entry["answer"]], sort_keys=True, ensure_ascii=True, allow_nan=False)


def metadata(entry: dict, *needed: str) -> dict:
    """What the entry's metadata says of its question (its bookkeeping aside): where the text varies by
    template alone, the metadata is the question. needed: the fields that must be there (the question's
    content: a metadata without them is another version's)."""
    found = {k: v for k, v in entry["metadata"].items() if k not in BOOKKEEPING}
    missing = [k for k in needed if k not in found]
    if missing:
        raise ValueError(f"no {', '.join(missing)} in its metadata")
    return found


# --- arithmetic: the canonical form of an expression -----------------------------------------------------
def arithmetic(expression: str, floordiv: bool = False) -> str:
    """An expression with its sums and products in canonical order: "7 * 3" and "3 * 7" are one, and so are
    "5 - 2 + 1" and "1 + 5 - 2" (signed terms) and "2 + -3" and "2 - 3"; other operations keep their order.
    floordiv: "/" is integer division, as basic_arithmetic evaluates it."""
    text = expression.replace("/", "//") if floordiv else expression
    return _canonical(ast.parse(text, mode="eval").body)


def _canonical(node) -> str:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return repr(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) or \
            isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and _is_sum(node.operand):
        return "sum(" + ",".join(sorted(sign + term for sign, term in _terms(node, "+"))) + ")"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return "prod(" + ",".join(sorted(_factors(node))) + ")"
    if isinstance(node, ast.BinOp) and type(node.op) in _ORDERED:
        return f"({_canonical(node.left)} {_ORDERED[type(node.op)]} {_canonical(node.right)})"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return "-" + _canonical(node.operand)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd):
        return _canonical(node.operand)
    raise ValueError(f"not arithmetic: {type(node).__name__}")


_ORDERED = {ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>"}


def _is_sum(node) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) or \
        isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) and _is_sum(node.operand)


def _terms(node, sign: str) -> list[tuple[str, str]]:
    """A sum's terms, each with its sign, through parentheses and negations: a - (b - c) is +a, -b, +c."""
    flip = "-" if sign == "+" else "+"
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        return _terms(node.left, sign) + _terms(node.right, sign if isinstance(node.op, ast.Add) else flip)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _terms(node.operand, flip if isinstance(node.op, ast.USub) else sign)
    term = _canonical(node)
    return [("+" if term in ("0", "0.0") else sign, term)]  # 5 - 0 is 5 + 0


def _factors(node) -> list[str]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _factors(node.left) + _factors(node.right)
    return [_canonical(node)]


# --- the families: one registration each ------------------------------------------------------------------
@register("products")
def _products(entry, config):
    return arithmetic(entry["metadata"]["expression"])


@register("chain_sum")
def _chain_sum(entry, config):
    return arithmetic(entry["metadata"]["expression"])


@register("decimal_chain_sum")
def _decimal_chain_sum(entry, config):
    return arithmetic(entry["metadata"]["expression"])


@register("basic_arithmetic")
def _basic_arithmetic(entry, config):
    # without parentheses its generator evaluates left to right, not by precedence: only spacing and the
    # question's template are aside there ("Calculate 3 + 4." and "What is 3 + 4?" are one)
    expression = entry["metadata"]["expression"]
    if config.get("allow_parentheses", True):
        return arithmetic(expression, floordiv=True)
    return "".join(expression.split())


@register("tsumego")
def _tsumego(entry, config):
    return metadata(entry, "board")  # one board under another of its templates


@register("calendar_arithmetic")
def _calendar_arithmetic(entry, config):
    return metadata(entry, "task")  # one date (or year, or span) under another template


@register("time_intervals")
def _time_intervals(entry, config):
    # one start and end under another story ("a conference call", "a system operation")
    return metadata(entry, "start_time", "end_time", "format")


@register("bf")
def _bf(entry, config):
    return metadata(entry, "bf_program")  # one program under another template


@register("family_relationships")
def _family_relationships(entry, config):
    story = entry["question"].split("\n\n")[0]  # the family; then one of its templates asks of two of them
    return [story, entry["metadata"]["person1"], entry["metadata"]["person2"]]


@register("sentence_reordering")
def _sentence_reordering(entry, config):
    # the words of one sentence, in any order: what is asked is to order them
    _, colon, words = entry["question"].partition("following sentence: ")
    if not colon:
        raise ValueError("no 'following sentence: ' in its question")
    return sorted(words.split())


@register("letter_jumble")
def _letter_jumble(entry, config):
    # each word's letters, in any order, word by word: one passage scrambled anew is the same question
    return ["".join(sorted(word)) for word in entry["metadata"]["scrambled_words"]]
