"""ClassAd ``Requirements`` (gLite and HTCondor) against a slot: the verdict and why.

The slot is a ClassAd built from a dict (``MJF_MACHINE_HS06``, ``GlueHostBenchmarkSI00``,
...; however it was produced). The expression is evaluated by the library with the
slot ad both as its own scope and as its target, since there is no job ad: ``other.X``
(gLite), ``TARGET.X`` (HTCondor), ``MY.X`` and a bare ``X`` all name the slot's
attribute. The library itself resolves ``other.`` like ``TARGET.`` (case-insensitively),
so nothing is rewritten.

The verdict: ``true`` (or a non-zero number, as HTCondor's matchmaking converts it)
is a match; ``false`` is no match. ``undefined`` - in practice an attribute the slot
does not have - is **no match**, as in HTCondor (and as RFC #7 rules for DIRAC: a
requirement the resource does not describe makes it ineligible); the explanation
names the undefined attribute. An ``error`` result (a type error such as a number
compared with a string) or a result that is no boolean, and an expression that does
not parse, are **unreadable**: the requirement cannot be judged, and the message
says which clause.

The explanation walks the top level of the expression (``?:``, ``||``, ``&&``,
parentheses, then one comparison) on the library's tokens' boundaries: the text is
split by a small tokenizer aware of string literals, quoted attribute names and
comments, and each piece is evaluated by the library again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from . import Verdict, _excerpt, _judged, _library, _unreadable

# --- a tokenizer, only to find clause boundaries and attribute references ------------

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<quoted>'(?:[^'\\]|\\.)*')
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>=\?=|=!=|\|\||&&|==|!=|<=|>=|\?:|>>>|<<|>>|[-+*/%<>!?:()\[\]{},;.=~^&|@])
""", re.VERBOSE | re.DOTALL)

_OPEN = {"(": ")", "[": "]", "{": "}"}
# HTCondor's ClassAd library parses and prints an expression recursively: a chain of
# ~50,000 operators crashes printing it, ~200,000 parsing it (the process dies, SIGSEGV).
# No text with more than this is handed to it; real requirements have tens.
MAX_OPERATORS = 10000
# Tokens that make no expression deeper: brackets, list and ad separators, scopes.
_NOT_OPERATORS = frozenset("()[]{},;.=")
_COMPARISONS = {"==", "!=", "<", "<=", ">", ">=", "=?=", "=!=", "is", "isnt"}
_KEYWORDS = {"true", "false", "undefined", "error", "is", "isnt", "parent"}
_SCOPES = {"my", "target", "other", "parent"}


class _Token:
    __slots__ = ("end", "kind", "start", "text")

    def __init__(self, kind: str, text: str, start: int, end: int):
        self.kind, self.text, self.start, self.end = kind, text, start, end

    @property
    def word(self) -> str:
        """The operator, or a keyword operator (is, isnt) in lower case."""
        if self.kind == "name" and self.text.lower() in ("is", "isnt"):
            return self.text.lower()
        return self.text if self.kind == "op" else ""


class _SyntaxProblem(Exception):
    pass


def _tokens(text: str) -> list[_Token]:
    found, position = [], 0
    while position < len(text):
        if text.startswith("/*", position):
            # Found by str.find, not by the pattern: a lazy match of every unclosed "/*"
            # would read to the end of the text again and again (quadratic).
            end = text.find("*/", position + 2)
            if end < 0:
                raise _SyntaxProblem(f"does not parse: the comment at character "
                                     f"{position + 1} is never closed")
            position = end + 2
            continue
        hit = _TOKEN.match(text, position)
        if hit is None:
            raise _SyntaxProblem(f"does not parse: unexpected {text[position]!r} "
                                 f"at character {position + 1}")
        if hit.lastgroup != "space":
            found.append(_Token(hit.lastgroup, hit.group(), hit.start(), hit.end()))
        position = hit.end()
    operators = sum(1 for token in found if token.kind == "op" and token.text not in _NOT_OPERATORS)
    if operators > MAX_OPERATORS:
        raise _SyntaxProblem(f"has {operators} operators, more than the {MAX_OPERATORS} "
                             "HTCondor's ClassAd library is given (it crashes on deeper ones)")
    depth: list[_Token] = []
    for token in found:
        if token.text in _OPEN and token.kind == "op":
            depth.append(token)
        elif token.kind == "op" and token.text in _OPEN.values():
            if not depth or _OPEN[depth[-1].text] != token.text:
                raise _SyntaxProblem(f"does not parse: unbalanced {token.text!r} "
                                     f"at character {token.start + 1}")
            depth.pop()
    if depth:
        raise _SyntaxProblem(f"does not parse: {depth[-1].text!r} at character "
                             f"{depth[-1].start + 1} is never closed")
    return found


def _nesting(token: _Token) -> int:
    """+1 for an opening bracket, -1 for a closing one, else 0."""
    if token.kind == "op" and token.text in _OPEN:
        return 1
    return -1 if token.kind == "op" and token.text in _OPEN.values() else 0


def _top_level(tokens: list[_Token]) -> list[tuple[int, _Token]]:
    """The tokens outside any brackets, with their indices."""
    out, depth = [], 0
    for index, token in enumerate(tokens):
        change = _nesting(token)
        depth += change
        if not change and depth == 0:
            out.append((index, token))
    return out


def _references(tokens: list[_Token]) -> list[str]:
    """Attribute references (``other.X``, ``TARGET.X``, ``X``) in a clause, in order."""
    refs: list[str] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        follows_dot = index > 0 and tokens[index - 1].text == "."
        if token.kind in ("name", "quoted") and not follows_dot:
            parts = [token.text]
            while (index + 2 < len(tokens) and tokens[index + 1].text == "."
                   and tokens[index + 2].kind in ("name", "quoted")):
                parts.append(tokens[index + 2].text)
                index += 2
            is_call = index + 1 < len(tokens) and tokens[index + 1].text == "("
            lone_keyword = len(parts) == 1 and parts[0].lower() in _KEYWORDS
            if not is_call and not lone_keyword and parts[-1].lower() not in _SCOPES:
                ref = ".".join(parts)
                if ref not in refs:
                    refs.append(ref)
        index += 1
    return refs


def _attribute_name(ref: str) -> str:
    parts = ref.split(".")
    while len(parts) > 1 and parts[0].lower() in _SCOPES:
        parts.pop(0)
    return ".".join(parts)


# --- the top-level structure of a clause, shared by the explanation and the reducer ----

def _piece(text: str, tokens: list[_Token], first: int, last: int):
    """The text and tokens of tokens[first:last]."""
    part = tokens[first:last]
    start, end = part[0].start, part[-1].end
    shifted = [_Token(t.kind, t.text, t.start - start, t.end - start) for t in part]
    return text[start:end], shifted


def strip_parentheses(text: str, tokens: list[_Token]):
    """The clause without the parentheses around all of it."""
    while (len(tokens) > 2 and tokens[0].text == "(" and tokens[-1].text == ")"
           and closes_at_end(tokens)):
        text, tokens = _piece(text, tokens, 1, len(tokens) - 1)
    return text, tokens


def closes_at_end(tokens: list[_Token]) -> bool:
    """Whether the bracket opened by the first token closes at the last."""
    depth = 0
    for index, token in enumerate(tokens):
        change = _nesting(token)
        depth += change
        if change < 0 and depth == 0:
            return index == len(tokens) - 1
    return False


def split_clause(text: str, tokens: list[_Token]):
    """('?', [cond, yes, no]) | ('||', parts) | ('&&', parts) | ('cmp', [l, op, r]) | None."""
    top = _top_level(tokens)
    question = next((i for i, t in top if t.text == "?"), None)
    if question is not None:
        nested, colon = 0, None
        for i, token in top:
            if i <= question:
                continue
            if token.text == "?":
                nested += 1
            elif token.text == ":":
                if nested == 0:
                    colon = i
                    break
                nested -= 1
        if colon is not None and 0 < question < colon < len(tokens) - 1:
            return "?", [_piece(text, tokens, 0, question),
                         _piece(text, tokens, question + 1, colon),
                         _piece(text, tokens, colon + 1, len(tokens))]
        return None
    for operator in ("||", "&&"):
        cuts = [i for i, t in top if t.text == operator]
        if cuts:
            bounds = [-1, *cuts, len(tokens)]
            return operator, [_piece(text, tokens, a + 1, b)
                              for a, b in zip(bounds, bounds[1:]) if b > a + 1]
    comparisons = [(i, t) for i, t in top if t.word in _COMPARISONS]
    if len(comparisons) == 1 and 0 < comparisons[0][0] < len(tokens) - 1:
        i, token = comparisons[0]
        return "cmp", [_piece(text, tokens, 0, i), token.word,
                       _piece(text, tokens, i + 1, len(tokens))]
    return None


# --- ClassAd requirements ------------------------------------------------------------


def _show(value: Any, library) -> str:
    """A value as ClassAd syntax."""
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, str):
        return library.quote(value)
    if isinstance(value, list):
        return "{ " + ", ".join(_show(item, library) for item in value) + " }"
    if isinstance(value, library.Value):
        return value.name.lower()
    if isinstance(value, library.ClassAd):
        # A whole ad (``root``, ``my``, ``target`` name the match's own): the library
        # prints it over many lines, and a message quotes one.
        return _excerpt(str(value))
    return str(value)


def _slot_ad(slot: dict, library):
    ad = library.ClassAd()
    for key, value in slot.items():
        if value is None:
            continue
        if not isinstance(value, (bool, int, float, str, list)):
            raise TypeError(f"slot attribute {key} has a {type(value).__name__} value")
        ad[key] = value
    return ad


# Said where a requirement was judged term by term (see ClassAdSlot._in_parts).
DEEP_WARNING = ("the requirement is nested too deeply for HTCondor's ClassAd library to "
                "evaluate whole, so it was judged term by term; a pool whose matchmaking "
                "uses that library may never match it")


class ClassAdSlot:
    """One slot ad, made once, against which requirements are evaluated."""

    def __init__(self, slot: dict[str, int | float | str | bool | list]):
        self._library = _library()
        # The same ad object as scope and target makes the library lose TARGET.: two copies.
        self._ad = _slot_ad(slot, self._library)
        self._target = _slot_ad(slot, self._library)
        self._judged_in_parts = False

    def _evaluate(self, text: str):
        """The library's value of an expression, or raise _SyntaxProblem."""
        library = self._library
        try:
            tree = library.ExprTree(text)
        except (library.ClassAdException, ValueError):
            raise _SyntaxProblem(f"does not parse as a ClassAd expression: "
                                 f"{_excerpt(text)}") from None
        try:
            return tree.eval(scope=self._ad, target=self._target)
        except library.ClassAdException:
            # The library evaluates recursively and gives up a few hundred operators deep
            # (500 `&&` terms); a chain of terms is judged term by term with its logic.
            value = self._in_parts(text)
            if value is None:
                raise _SyntaxProblem(
                    "is nested too deeply for HTCondor's ClassAd library to evaluate, and "
                    "is no chain of &&, || or ?: to judge term by term: "
                    f"`{_excerpt(text)}`") from None
            self._judged_in_parts = True
            return value

    def _in_parts(self, text: str, evaluate=None):
        """The value of a chain of ``||`` or ``&&`` terms, or of ``c ? a : b``, by the
        library's three-valued logic (that of HTCondor's matchmaking), each part's
        value from ``evaluate`` (default: :meth:`_evaluate`); None if ``text`` is
        neither. Left to right, stopping where the library's short cut stops."""
        evaluate = evaluate or self._evaluate
        text, tokens = strip_parentheses(text, _tokens(text))
        split = split_clause(text, tokens)
        if split is None or split[0] == "cmp":
            return None
        kind, parts = split
        undefined, error = self._library.Value.Undefined, self._library.Value.Error
        if kind == "?":
            (condition, _), (yes, _), (no, _) = parts
            truth = self._truth(evaluate(condition))
            if truth is undefined or truth is error:  # an IntEnum: `in` would take True for 1
                return truth
            return evaluate(yes if truth else no)
        # && is true until a false term; || false until a true one. undefined stays
        # undefined unless a term decides; error (or a term that is no truth value) wins.
        decisive = kind == "||"
        state = not decisive
        for part, _ in parts:
            term = self._truth(evaluate(part))
            if term is error or (state is undefined and term is not decisive):
                state = error if term is error else undefined
            elif state is not undefined or term is decisive:
                state = term
            if state is error or state is decisive:
                break
        return state

    def _truth(self, value):
        """A value as && and || take it: True/False (a number: non-zero), undefined, or
        error for anything else."""
        library = self._library
        if value is True or value is False:
            return value
        if isinstance(value, library.Value):  # an IntEnum: before the numbers
            return library.Value.Undefined if value == library.Value.Undefined \
                else library.Value.Error
        if isinstance(value, (int, float)):
            return value != 0
        return library.Value.Error

    def _verdict_of(self, value) -> bool | None:
        """True/False, or None when the value is no truth value (error, string...)."""
        library = self._library
        if value is True or value is False:
            return value
        if isinstance(value, library.Value):  # an IntEnum: before the numbers
            return False if value == library.Value.Undefined else None
        if isinstance(value, (int, float)):
            return value != 0
        return None

    def requirements(self, expression: str, explain: bool = False) -> Verdict:
        """The verdict on one requirement; never raises, whatever the text."""
        return _judged(self._requirements, expression, explain)

    def _requirements(self, expression: str, explain: bool) -> Verdict:
        text = expression.strip()
        if not text:
            return _unreadable("the requirement is empty")
        self._judged_in_parts = False
        try:
            tokens = _tokens(text)
            value = self._evaluate(text)
            truth = self._verdict_of(value)
            if truth is None:
                where = (self._first_error(text, tokens)
                         or f"`{_excerpt(text)}` is {_excerpt(_show(value, self._library))}")
                return _unreadable(f"the requirement cannot be evaluated: {where}")
            reasons = self._explain(text, tokens) if explain and not truth else []
        except _SyntaxProblem as problem:
            return _unreadable(f"the requirement {problem}")
        warnings = [DEEP_WARNING] if self._judged_in_parts else []
        return Verdict(truth, reasons=reasons, warnings=warnings)

    def _describe_side(self, text: str, tokens: list[_Token]) -> str:
        value = _show(self._evaluate(text), self._library)
        if (len(tokens) == 1 and tokens[0].kind in ("number", "string")) or value == text:
            return _excerpt(text)
        return f"{_excerpt(text)} = {_excerpt(value)}"

    def _leaf(self, text: str, tokens: list[_Token], value) -> list[str]:
        library = self._library
        # A clause and its value are quoted as every text is, cut to one short line: a
        # requirement of 400 digits is one reason, not a screenful.
        shown = _excerpt(_show(value, library))
        if isinstance(value, library.Value) and value == library.Value.Undefined:
            missing = [ref for ref in _references(tokens)
                       if self._evaluate(ref) == library.Value.Undefined]
            if missing:
                names = ", ".join(_attribute_name(ref) for ref in missing)
                return [f"`{_excerpt(text)}` is undefined: the slot has no {names}"]
        split = split_clause(text, tokens)
        if split is not None and split[0] == "cmp":
            (left, left_tokens), operator, (right, right_tokens) = split[1]
            return [f"`{_excerpt(text)}` is {shown}: {self._describe_side(left, left_tokens)} "
                    f"{operator} {self._describe_side(right, right_tokens)}"]
        refs = [f"{ref} = {_excerpt(_show(self._evaluate(ref), library))}"
                for ref in _references(tokens)]
        return [f"`{_excerpt(text)}` is {shown}" + (f": {', '.join(refs)}" if refs else "")]

    def _explain(self, text: str, tokens: list[_Token]) -> list[str]:
        """Why ``text`` (which is not true) is not true."""
        text, tokens = strip_parentheses(text, tokens)
        value = self._evaluate(text)
        split = split_clause(text, tokens)
        if split is None or split[0] == "cmp":
            return self._leaf(text, tokens, value)
        kind, parts = split
        if kind == "?":
            (cond, cond_tokens), yes, no = parts
            chosen = self._evaluate(cond)
            truth = self._verdict_of(chosen)
            if truth is None or (isinstance(chosen, self._library.Value)):
                return [f"the condition of `{text}` is not a truth value:",
                        *self._leaf(cond, cond_tokens, chosen)]
            branch_text, branch_tokens = yes if truth else no
            head = self._leaf(cond, cond_tokens, chosen)[0]
            return [f"{head}, so `{branch_text}` applies", *self._explain(branch_text,
                                                                          branch_tokens)]
        failing = [(p, t) for p, t in parts if self._verdict_of(self._evaluate(p)) is not True]
        if kind == "||":
            reasons = [f"none of the {len(parts)} alternatives of `{text}` holds:"]
            for part, part_tokens in failing:
                reasons.extend(self._explain(part, part_tokens))
            return reasons
        reasons = []
        for part, part_tokens in failing:
            reasons.extend(self._explain(part, part_tokens))
        return reasons or self._leaf(text, tokens, value)

    def _first_error(self, text: str, tokens: list[_Token]) -> str | None:
        """The innermost clause whose value is no truth value, described."""
        text, tokens = strip_parentheses(text, tokens)
        split = split_clause(text, tokens)
        if split is not None and split[0] != "cmp":
            parts = split[1]
            for part, part_tokens in parts:
                if self._verdict_of(self._evaluate(part)) is None:
                    return self._first_error(part, part_tokens)
        value = self._evaluate(text)
        return self._leaf(text, tokens, value)[0]


def classad_requirements(expression: str, slot: dict[str, int | float | str | bool | list],
                         explain: bool = False) -> Verdict:
    """Evaluate a job's ClassAd ``Requirements`` (``other.X`` or ``TARGET.X``) against
    the slot ad. Raises MatchUnavailable when HTCondor's library is missing."""
    return ClassAdSlot(slot).requirements(expression, explain)


def classad_requirements_many(expressions: Iterable[str], slot: dict,
                              explain: bool = False) -> list[Verdict]:
    """Many requirements against one slot: the slot ad is made once."""
    matcher = ClassAdSlot(slot)
    return [matcher.requirements(expression, explain) for expression in expressions]


