"""Does this job slot satisfy a job's requirements? The matching engine of `mjf match`.

Two languages, both read with HTCondor's own ClassAd library (``classad2``, from the
optional ``htcondor`` wheel: ``pip install 'mjf-hooks[match]'``). The library is
imported inside the functions only, never when this module is imported, so nothing on
a hook's path pays for it.

ClassAd ``Requirements`` (gLite and HTCondor)
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

DIRAC JDL
    ``[ ... ]`` (or the bare ``Key = value;`` list DIRAC also accepts) parsed by the
    library, then DIRAC 9.1's task-queue semantics against a resource description with
    DIRAC's keys (``NumberOfProcessors``, ``MaxRAM`` in MB, ``CPUTime`` in HS06 s,
    ``WholeNode``, ``Tag``, ``RequiredTag``, ``Site``, ``GridCE``, ``Platform``,
    ``JobType``):

    - tags: the resource's ``Tag`` plus ``1Processors`` ... ``<N>Processors`` from its
      ``NumberOfProcessors`` N (1 when absent), ``MultiProcessor`` when N > 1, and
      ``WholeNode`` when the key ``WholeNode`` is present at all. The job's tags:
      ``NumberOfProcessors`` N > 1 gives ``<N>Processors`` + ``MultiProcessor``; without
      it ``MinNumberOfProcessors`` does the same, and ``MaxNumberOfProcessors`` > 1 (or
      absent beside a minimum) adds ``MultiProcessor``; ``WholeNode`` = yes/true/1/y adds
      ``WholeNode`` + ``MultiProcessor``; ``Tag`` and ``Tags`` are added. Every job tag
      must be among the resource's, every resource ``RequiredTag`` among the job's;
    - ``CPUTime``: the job's (86400 when absent) must be <= the resource's; a resource
      without ``CPUTime`` matches nothing;
    - ``MinRAM`` (MB) <= the resource's ``MaxRAM`` (MB); the job's ``MaxRAM`` is a limit,
      not matched;
    - ``Site``, ``GridCE``, ``Platform``, ``JobType``: none listed (or ``Site`` "ANY"),
      or the resource's value among those listed (a list matches any of its values);
      the resource lacking the key is no match; ``BannedSite`` containing the
      resource's ``Site`` is no match;
    - a ``Requirements = [ ... ]`` section (RFC #7): each key absent from the resource
      makes it ineligible; a list matches when the resource has one of its values; a
      number is a capacity, the resource's must be >= the job's; anything else must be
      equal (strings case-sensitively, as DIRAC compares them).

    A value of the wrong type (``NumberOfProcessors = "four"``) makes the JDL unreadable;
    numbers given as decimal strings (``CPUTime = "86400"``) are read as DIRAC reads them.
    Strings may list several values separated by commas, as in DIRAC.

Many requirements against one slot: build a :class:`ClassAdSlot` or :class:`DiracResource`
once (the slot ad is made once) and call it per requirement, or use
:func:`classad_requirements_many` / :func:`dirac_requirements_many`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from .errors import MJFError

INSTALL_HINT = "pip install 'mjf-hooks[match]'"


class MatchUnavailable(MJFError):
    """HTCondor's ClassAd library is not installed."""


def _library():
    try:
        import classad2
    except ImportError:
        raise MatchUnavailable(
            "matching needs HTCondor's ClassAd library (the htcondor package): "
            f"{INSTALL_HINT}") from None
    return classad2


class Verdict:
    """The answer for one requirement: ``matched``; ``unreadable`` (None, or a one-line
    message saying where the requirement cannot be read); ``reasons`` (why it did not
    match, filled when asked to explain); ``warnings`` (one line each: what the reader
    should know about how it was judged)."""

    __slots__ = ("matched", "reasons", "unreadable", "warnings")

    def __init__(self, matched: bool, unreadable: str | None = None,
                 reasons: list[str] | None = None, warnings: list[str] | None = None):
        self.matched = matched
        # One line each, whatever line breaks the requirement's text had.
        self.unreadable = None if unreadable is None else " ".join(unreadable.split())
        self.reasons = [" ".join(reason.split()) for reason in reasons or []]
        self.warnings = [" ".join(warning.split()) for warning in warnings or []]

    @property
    def exit_code(self) -> int:
        """0 match, 1 no match, 2 unreadable: `mjf match`'s exit status."""
        if self.unreadable is not None:
            return 2
        return 0 if self.matched else 1

    def __bool__(self) -> bool:
        return self.matched

    def __repr__(self) -> str:
        if self.unreadable is not None:
            return f"Verdict(unreadable={self.unreadable!r})"
        return f"Verdict(matched={self.matched!r}, reasons={self.reasons!r})"


def _unreadable(message: str) -> Verdict:
    return Verdict(False, unreadable=message)


# How much of a requirement's text a message quotes: a requirement may be a megabyte.
_EXCERPT_CHARS = 120


def _excerpt(text: str) -> str:
    """``text`` on one line, cut to a length a message can quote."""
    line = " ".join(text.split())
    return line if len(line) <= _EXCERPT_CHARS else line[:_EXCERPT_CHARS - 3] + "..."


def _judged(judge, *args) -> Verdict:
    """``judge(*args)``, or the one-line unreadable verdict of whatever it raised: a
    requirement, however hostile, is one verdict and never stops the others."""
    try:
        return judge(*args)
    except RecursionError:
        return _unreadable("the requirement is nested too deeply to be judged")
    except MemoryError:
        return _unreadable("the requirement is too large to be judged")
    except Exception as error:  # noqa: BLE001 - the library's own failures included
        return _unreadable(f"the requirement cannot be judged: {type(error).__name__}: "
                           f"{_excerpt(str(error))}")


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
        text, tokens = self._strip_parentheses(text, _tokens(text))
        split = self._split(text, tokens)
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
                         or f"`{_excerpt(text)}` is {_show(value, self._library)}")
                return _unreadable(f"the requirement cannot be evaluated: {where}")
            reasons = self._explain(text, tokens) if explain and not truth else []
        except _SyntaxProblem as problem:
            return _unreadable(f"the requirement {problem}")
        warnings = [DEEP_WARNING] if self._judged_in_parts else []
        return Verdict(truth, reasons=reasons, warnings=warnings)

    # The explanation: split on the top-level structure, evaluate each piece.

    def _piece(self, text: str, tokens: list[_Token], first: int, last: int):
        """The text and tokens of tokens[first:last]."""
        part = tokens[first:last]
        start, end = part[0].start, part[-1].end
        shifted = [_Token(t.kind, t.text, t.start - start, t.end - start) for t in part]
        return text[start:end], shifted

    def _strip_parentheses(self, text: str, tokens: list[_Token]):
        while (len(tokens) > 2 and tokens[0].text == "(" and tokens[-1].text == ")"
               and self._closes_at_end(tokens)):
            text, tokens = self._piece(text, tokens, 1, len(tokens) - 1)
        return text, tokens

    @staticmethod
    def _closes_at_end(tokens: list[_Token]) -> bool:
        depth = 0
        for index, token in enumerate(tokens):
            change = _nesting(token)
            depth += change
            if change < 0 and depth == 0:
                return index == len(tokens) - 1
        return False

    def _split(self, text: str, tokens: list[_Token]):
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
                return "?", [self._piece(text, tokens, 0, question),
                             self._piece(text, tokens, question + 1, colon),
                             self._piece(text, tokens, colon + 1, len(tokens))]
            return None
        for operator in ("||", "&&"):
            cuts = [i for i, t in top if t.text == operator]
            if cuts:
                bounds = [-1, *cuts, len(tokens)]
                return operator, [self._piece(text, tokens, a + 1, b)
                                  for a, b in zip(bounds, bounds[1:]) if b > a + 1]
        comparisons = [(i, t) for i, t in top if t.word in _COMPARISONS]
        if len(comparisons) == 1 and 0 < comparisons[0][0] < len(tokens) - 1:
            i, token = comparisons[0]
            return "cmp", [self._piece(text, tokens, 0, i), token.word,
                           self._piece(text, tokens, i + 1, len(tokens))]
        return None

    def _describe_side(self, text: str, tokens: list[_Token]) -> str:
        value = _show(self._evaluate(text), self._library)
        if (len(tokens) == 1 and tokens[0].kind in ("number", "string")) or value == text:
            return text
        return f"{text} = {value}"

    def _leaf(self, text: str, tokens: list[_Token], value) -> list[str]:
        library = self._library
        shown = _show(value, library)
        if isinstance(value, library.Value) and value == library.Value.Undefined:
            missing = [ref for ref in _references(tokens)
                       if self._evaluate(ref) == library.Value.Undefined]
            if missing:
                names = ", ".join(_attribute_name(ref) for ref in missing)
                return [f"`{text}` is undefined: the slot has no {names}"]
        split = self._split(text, tokens)
        if split is not None and split[0] == "cmp":
            (left, left_tokens), operator, (right, right_tokens) = split[1]
            return [f"`{text}` is {shown}: {self._describe_side(left, left_tokens)} "
                    f"{operator} {self._describe_side(right, right_tokens)}"]
        refs = [f"{ref} = {_show(self._evaluate(ref), library)}" for ref in _references(tokens)]
        return [f"`{text}` is {shown}" + (f": {', '.join(refs)}" if refs else "")]

    def _explain(self, text: str, tokens: list[_Token]) -> list[str]:
        """Why ``text`` (which is not true) is not true."""
        text, tokens = self._strip_parentheses(text, tokens)
        value = self._evaluate(text)
        split = self._split(text, tokens)
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
        text, tokens = self._strip_parentheses(text, tokens)
        split = self._split(text, tokens)
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


# --- DIRAC ---------------------------------------------------------------------------

_LIST_KEYS = ("Site", "GridCE", "Platform", "JobType")
_DEFAULT_CPUTIME = 86400


class _JDLProblem(Exception):
    pass


# A count or an amount of seconds or MB: more digits than this is no such number (and
# int() raises on thousands of digits).
_MAX_DIGITS = 18


def _integer(key: str, value: Any) -> int:
    """A whole number of 0 or more, as DIRAC reads one (a decimal string counts)."""
    if isinstance(value, bool):
        raise _JDLProblem(f"{key} = {value} is not a number")
    if isinstance(value, float) and value.is_integer() and abs(value) < 10 ** _MAX_DIGITS:
        value = int(value)
    elif isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        if len(value.strip()) > _MAX_DIGITS:
            raise _JDLProblem(f"{key} = {_excerpt(value)!r} is too large")
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _JDLProblem(f"{key} = {_excerpt(repr(value))} is not a whole number")
    if value < 0:
        raise _JDLProblem(f"{key} = {value} is negative")
    return value


def _strings(key: str, value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise _JDLProblem(f"{key} = {value!r} is not a string or a list of strings")
        out.extend(part.strip() for part in str(item).split(",") if part.strip())
    return out


def _yes(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value == 1
    if isinstance(value, str):
        return value.strip().lower() in ("1", "yes", "true", "y")
    raise _JDLProblem(f"{key} = {value!r} is not yes or no")


class DiracResource:
    """A DIRAC resource description (the dict a pilot hands to the Matcher), prepared once."""

    def __init__(self, resource: dict):
        self._library = _library()
        self.resource = dict(resource)
        processors = resource.get("NumberOfProcessors", 1)
        try:
            processors = _integer("NumberOfProcessors", processors)
        except _JDLProblem:
            processors = 1
        # 1Processors ... <N>Processors are tags of the resource too, asked by has_tag:
        # never a set of N (a job's directory its user wrote may claim 10**18 CPUs).
        self.processors = processors
        tags = set(_strings("Tag", resource.get("Tag", [])))
        if processors > 1:
            tags.add("MultiProcessor")
        if "WholeNode" in resource:
            tags.add("WholeNode")
        self.tags = tags
        self.required_tags = set(_strings("RequiredTag", resource.get("RequiredTag", [])))

    def has_tag(self, tag: str) -> bool:
        """Whether the resource has the tag, ``<n>Processors`` for n up to its own included."""
        count = tag[:-len("Processors")] if tag.endswith("Processors") else ""
        if count.isascii() and count.isdigit() and not count.startswith("0"):
            return len(count) <= _MAX_DIGITS and int(count) <= self.processors
        return tag in self.tags

    def _shown_tags(self) -> str:
        processors = ["1Processors"] if self.processors == 1 else \
            [f"1Processors ... {self.processors}Processors"] if self.processors > 1 else []
        return ", ".join(processors + sorted(self.tags)) or "none"

    def _parse(self, jdl_text: str):
        library = self._library
        text = jdl_text.strip()
        if not text.startswith("["):
            text = f"[{text}]"
        try:
            tokens = _tokens(text)
        except _SyntaxProblem as problem:
            raise _JDLProblem(f"the JDL {problem}") from None
        if not ClassAdSlot._closes_at_end(tokens):
            raise _JDLProblem("the JDL does not parse: text after its closing ]")
        try:
            return library.ClassAd(text)
        except (library.ClassAdException, ValueError):
            raise _JDLProblem("the JDL does not parse as a ClassAd") from None

    def _value(self, ad, key: str):
        library = self._library
        try:
            value = ad.eval(key)
        except library.ClassAdException:  # nested too deeply for the library, say
            raise _JDLProblem(f"{key} cannot be evaluated by HTCondor's ClassAd "
                              "library") from None
        if isinstance(value, library.Value):
            if value == library.Value.Undefined:
                return None
            raise _JDLProblem(f"{key} evaluates to an error")
        return value

    def _job_tags(self, ad) -> list[str]:
        tags: list[str] = []
        processors, maximum = 1, 1
        if "NumberOfProcessors" in ad:
            processors = _integer("NumberOfProcessors", self._value(ad, "NumberOfProcessors"))
        elif "MinNumberOfProcessors" in ad:
            processors = _integer("MinNumberOfProcessors",
                                  self._value(ad, "MinNumberOfProcessors"))
            maximum = (_integer("MaxNumberOfProcessors", self._value(ad, "MaxNumberOfProcessors"))
                       if "MaxNumberOfProcessors" in ad else -1)
        if processors > 1:
            tags += [f"{processors}Processors", "MultiProcessor"]
        if maximum == -1 or maximum > 1:
            tags.append("MultiProcessor")
        if "WholeNode" in ad and _yes("WholeNode", self._value(ad, "WholeNode")):
            tags += ["WholeNode", "MultiProcessor"]
        for key in ("Tags", "Tag"):
            if key in ad:
                tags += _strings(key, self._value(ad, key))
        return list(dict.fromkeys(tags))

    def requirements(self, jdl_text: str, explain: bool = False) -> Verdict:
        """The verdict on one JDL by DIRAC's rules; never raises, whatever the text."""
        return _judged(self._requirements, jdl_text, explain)

    def _requirements(self, jdl_text: str, explain: bool) -> Verdict:
        try:
            ad = self._parse(jdl_text)
            reasons = self._check(ad)
        except _JDLProblem as problem:
            return _unreadable(str(problem))
        return Verdict(not reasons, reasons=reasons if explain else [])

    def _check(self, ad) -> list[str]:
        resource, reasons = self.resource, []
        tags = self._job_tags(ad)
        missing = [tag for tag in tags if not self.has_tag(tag)]
        if missing:
            reasons.append(f"the job's tags {_excerpt(', '.join(missing))} are not among "
                           f"the resource's ({self._shown_tags()})")
        unmet = sorted(tag for tag in self.required_tags if tag not in tags)
        if unmet:
            reasons.append(f"the resource requires the tags {', '.join(unmet)}, "
                           "which the job does not have")
        cputime = (_integer("CPUTime", self._value(ad, "CPUTime"))
                   if "CPUTime" in ad else _DEFAULT_CPUTIME)
        if "CPUTime" not in resource:
            reasons.append("the resource has no CPUTime")
        elif cputime > _integer("CPUTime", resource["CPUTime"]):
            reasons.append(f"CPUTime: the job's {cputime} > the resource's {resource['CPUTime']}")
        if "MinRAM" in ad:
            ram = _integer("MinRAM", self._value(ad, "MinRAM"))
            if "MaxRAM" not in resource:
                reasons.append("the resource has no MaxRAM for the job's MinRAM")
            elif ram > _integer("MaxRAM", resource["MaxRAM"]):
                reasons.append(f"MinRAM: the job's {ram} MB > the resource's MaxRAM "
                               f"{resource['MaxRAM']} MB")
        for key in _LIST_KEYS:
            wanted = _strings(key, self._value(ad, key)) if key in ad else []
            if key == "Site":
                wanted = [site for site in wanted if site.lower() != "any"]
            if wanted:
                have = _strings(key, resource[key]) if key in resource else []
                if not have:
                    reasons.append(f"{key}: the job wants one of {', '.join(wanted)}; "
                                   "the resource has none")
                elif not set(have) & set(wanted):
                    reasons.append(f"{key}: the resource's {', '.join(have)} is not among "
                                   f"{', '.join(wanted)}")
        if "BannedSite" in ad and "Site" in resource:
            banned = _strings("BannedSite", self._value(ad, "BannedSite"))
            hit = set(_strings("Site", resource["Site"])) & set(banned)
            if hit:
                reasons.append(f"BannedSite: the job bans {', '.join(sorted(hit))}")
        if "Requirements" in ad:
            reasons += self._section(self._value(ad, "Requirements"))
        return reasons

    def _section(self, section) -> list[str]:
        """RFC #7's Requirements = [ ... ]."""
        library = self._library
        if not isinstance(section, library.ClassAd):
            raise _JDLProblem("Requirements is not a [ ... ] section")
        reasons = []
        for key in list(section):
            wanted = self._value(section, key)
            if wanted is None:
                continue
            where = f"Requirements.{key}"
            if key not in self.resource:
                reasons.append(f"{where}: the resource does not describe {key}")
                continue
            have = self.resource[key]
            if isinstance(wanted, list):
                options = _strings(where, wanted)
                values = _strings(key, have) if isinstance(have, (list, str)) else [str(have)]
                if not set(values) & set(options):
                    reasons.append(f"{where}: the resource's {', '.join(values)} is not "
                                   f"among {', '.join(options)}")
            elif isinstance(wanted, (int, float)) and not isinstance(wanted, bool):
                if isinstance(have, bool) or not isinstance(have, (int, float)):
                    raise _JDLProblem(f"{where} = {wanted} is a number but the resource's "
                                      f"{key} is {have!r}")
                if have < wanted:
                    reasons.append(f"{where}: the resource's {have} < the job's {wanted}")
            elif isinstance(wanted, (str, bool)):
                values = have if isinstance(have, list) else [have]
                if wanted not in values:
                    reasons.append(f"{where}: the resource's {have!r} is not {wanted!r}")
            else:
                raise _JDLProblem(f"{where} is neither a value nor a list")
        return reasons


def dirac_requirements(jdl_text: str, resource: dict, explain: bool = False) -> Verdict:
    """Would DIRAC's Matcher give this JDL's job to a pilot presenting ``resource``?"""
    return DiracResource(resource).requirements(jdl_text, explain)


def dirac_requirements_many(jdl_texts: Iterable[str], resource: dict,
                            explain: bool = False) -> list[Verdict]:
    """Many JDLs against one resource: its tags are derived once."""
    matcher = DiracResource(resource)
    return [matcher.requirements(text, explain) for text in jdl_texts]


def jdl_requirements(jdl_text: str, slot: ClassAdSlot, resource: DiracResource,
                     explain: bool = False) -> Verdict:
    """A JDL of either kind: one whose ``Requirements`` is an expression (gLite: ``other.X``)
    is judged as ClassAd requirements against ``slot``; any other (DIRAC's keys, RFC #7's
    ``Requirements = [ ... ]`` section) by DIRAC's rules against ``resource``. Never
    raises, whatever the text."""
    return _judged(_jdl_requirements, jdl_text, slot, resource, explain)


def _jdl_requirements(jdl_text: str, slot: ClassAdSlot, resource: DiracResource,
                      explain: bool) -> Verdict:
    library = resource._library
    try:
        ad = resource._parse(jdl_text)
    except _JDLProblem as problem:
        return _unreadable(str(problem))
    if "Requirements" in ad and not isinstance(ad["Requirements"], library.ClassAd):
        return slot.requirements(str(ad.lookup("Requirements")), explain)
    return resource.requirements(jdl_text, explain)
