"""The condition language of deterministic ``decision`` steps.

A decision step maps values (``{"temp": 21.5, "repo": {...}}``) and gives each
branch a condition over them::

    temp > 25 and not raining
    status == "ok" or status in ["warn", "degraded"]
    len(items) >= 10 and items.0.name != null
    exists(geo.error) and geo.error.retryable == false
    "admin" in user.roles and not (a < 3 or b >= 4)

``compile_condition`` parses and checks a condition once, when the workflow is
validated; ``CompiledCondition.evaluate`` runs it per run. Nothing is ever passed
to ``eval``, and Python's ``ast`` is not involved.

Grammar (loosest binding first)::

    condition  := or
    or         := and ("or" and)*
    and        := not ("and" not)*
    not        := "not" not | comparison
    comparison := operand [("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not in") operand]
    operand    := literal | path | call | list | "(" condition ")"
    path       := NAME ("." KEY | "[" (STRING | ["-"] INTEGER) "]")*
    call       := ("len" | "exists" | "empty") "(" condition ")"
    list       := "[" [condition ("," condition)* [","]] "]"
    literal    := ["-"] NUMBER | STRING | "true" | "false" | "null"

NAME is ``[A-Za-z_][A-Za-z0-9_]*`` (a mapped name); KEY after ``.`` is
``[A-Za-z0-9_-]+`` and indexes a list when numeric (``items.0``, ``items.-1``);
``["any key"]`` reaches keys with other characters. Strings take single or
double quotes and the escapes ``\\" \\' \\\\ \\/ \\n \\t \\r \\uXXXX``. Numbers are
decimal (``3``, ``2.5``, ``1e6``). ``__x__`` names are refused. Comparisons do
not chain (``a < b < c`` is an error; write ``a < b and b < c``). There is no
arithmetic: a condition compares data; compute values in an upstream step
(a ``transform`` or the tool itself).

Semantics:

- A missing key, an out-of-range index, or a path through a non-container is
  ``null``. ``exists(p)`` is true when ``p`` is not null; ``empty(x)`` is true for
  null, ``""``, ``[]`` and ``{}``; ``len(x)`` of null is null.
- ``==``/``!=`` never raise: values of different kinds are unequal (``1 != "1"``,
  ``1 != true``), lists and objects compare deeply, ``1 == 1.0``.
- ``< <= > >=`` order two numbers or two strings; with null on either side they
  are false.
- ``x in list`` tests membership with ``==``; ``s in string`` a substring;
  ``k in object`` a key; anything ``in null`` is false. ``not in`` and ``!=`` are the
  exact negations, so ``x not in missing`` is true.
- ``and``/``or`` short-circuit and always give a boolean; a bare value is a
  condition by its truthiness (``raining``, ``len(items)``): null, false, 0, ``""``,
  ``[]`` and ``{}`` are false.

Static checks at compile time reject what is wrong for any data: unknown names
(when ``names`` is given), ``len(3)``, ``"a" < 3``, ``x < null``, ``1 in 2``,
``1 in "abc"``, ``len(x) == "3"``, ``exists("x")``, a literal used as a condition
(``status = "ok"`` fails earlier, pointing at ``=``). Type misuse that only the
data reveals (``len(x)`` where ``x`` is 5) raises ``ExpressionError`` when
evaluated — a failed step, not a silently wrong branch.

Limits against hostile input: ``MAX_LENGTH`` characters, ``MAX_DEPTH`` nesting
levels; both fail with ``ExpressionError``, never ``RecursionError``.

Why hand-written: ``simpleeval`` evaluates Python syntax (no ``true``/``null``,
Python's ``1 == True``, ``ast.parse`` on untrusted text) and checks types only
while evaluating; ``cel-python`` and ``rule-engine`` bring a parser generator
dependency and semantics of their own (CEL raises on ``null < 1``; neither
speaks the dot-path references flowpilot uses elsewhere). The language is small
enough that a tokenizer, a Pratt parser, a checker and an evaluator over frozen
nodes cost a few hundred lines and give exact messages with columns.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from .checker import Checker
from .errors import ExpressionError, excerpt
from .evaluator import Evaluator
from .nodes import Node
from .parser import MAX_DEPTH, parse

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "CompiledCondition", "ExpressionError", "compile_condition"]

MAX_LENGTH = 2000


@dataclass(frozen=True)
class CompiledCondition:
    """A parsed, checked condition; ``names`` are the mapped names it reads."""

    source: str
    names: frozenset[str]
    tree: Node = field(repr=False, compare=False)

    def evaluate(self, values: Mapping[str, Any]) -> bool:
        """True or false for these mapped values; ``ExpressionError`` on type misuse."""
        try:
            return Evaluator(self.source, values).condition(self.tree)
        except RecursionError:  # deeply nested *data* compared with ==
            raise ExpressionError(
                f"data too deeply nested to compare in `{excerpt(self.source)}`",
                source=self.source,
            ) from None


def compile_condition(text: str, *, names: Collection[str] | None = None) -> CompiledCondition:
    """Parse and statically check ``text``.

    With ``names`` (the step's mapped names), every root name must be one of them.
    Raises ``ExpressionError`` naming the condition and the column.
    """
    if not isinstance(text, str):
        raise ExpressionError(f"a condition must be a string, not {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(
            f"condition is {len(text)} characters long, more than the {MAX_LENGTH} allowed: "
            f"`{excerpt(text)}`",
            source=text,
        )
    if not text.strip():
        raise ExpressionError("condition is empty", source=text)
    tree = parse(text)
    checker = Checker(text, names)
    checker.check_condition(tree)
    return CompiledCondition(source=text, names=frozenset(checker.roots), tree=tree)
