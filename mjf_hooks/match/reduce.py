"""A job's requirements reduced to what constrains the node it may run on: the first half
of `mjf submit-args` (:mod:`.submit_options` is the second, per batch system).

A ClassAd ``Requirements`` (gLite ``other.X``, HTCondor ``TARGET.X``) is partially
evaluated by HTCondor's ClassAd library (``ClassAd.flatten``): constants are folded and
branches decided by them are gone, and what refers to the slot is left. The reduced
expression's top-level ``&&`` clauses are then read one by one, each a comparison of one
slot attribute with a constant (the attribute names of `mjf describe --format classad`):

- what the batch system gives the job (a **request**): cores, memory, wall time, CPU
  time, each held as the least and most the requirement allows, in one unit each;
- what the node is (a **node fact**, published by the site where its batch system matches
  on it): ``hs06`` (``MJF_MACHINE_HS06``), ``hs06_per_cpu`` (``GlueHostBenchmarkSI00`` /
  250), ``total_cpu`` (``MJF_MACHINE_TOTAL_CPU``), each as a lower bound; and **tags**
  (``member("X", other.GlueHostApplicationSoftwareRunTimeEnvironment)``).

``c ? a : b`` whose condition is not fixed is given both ``a`` and ``b`` (whatever ``c``
is on the node, the job then satisfies the branch that applies) with a warning; ``||``
of single node clauses is kept as alternatives. Anything else - another attribute, a
``!=``, an upper bound on a node fact, ``false`` - raises :class:`Unexpressible` naming
the clause: a requirement is never dropped.

A DIRAC JDL becomes the same :class:`Needs` from its keys (``NumberOfProcessors``,
``Min``/``MaxNumberOfProcessors``, ``WholeNode``, ``MaxRAM``/``MinRAM`` in MB,
``CPUTime`` in HS06 s through the HS06 per CPU, ``Tag``/``Tags``).
"""

from __future__ import annotations

import math
from fractions import Fraction

from ..errors import MJFError
from . import _excerpt, _library
from .classad import MAX_OPERATORS, _SyntaxProblem, _tokens, split_clause, strip_parentheses


class Unexpressible(MJFError):
    """A requirement that cannot be read, or not expressed as submit options: one line."""


REQUEST_KINDS = ("cores", "memory_mib", "wall_secs", "cpu_secs")

# attribute (lower case) -> (request kind, the kind's units per unit of the attribute).
# MB is 2^20 bytes and GLUE times are minutes, as `mjf describe` writes them.
_REQUESTS = {
    "gluehostarchitecturesmpsize": ("cores", Fraction(1)),
    "mjf_job_allocated_cpu": ("cores", Fraction(1)),
    "gluehostmainmemoryramsize": ("memory_mib", Fraction(1)),
    "mjf_job_max_rss_bytes": ("memory_mib", Fraction(1, 2**20)),
    "gluecepolicymaxwallclocktime": ("wall_secs", Fraction(60)),
    "mjf_job_wall_limit_secs": ("wall_secs", Fraction(1)),
    "gluecepolicymaxcputime": ("cpu_secs", Fraction(60)),
    "mjf_job_cpu_limit_secs": ("cpu_secs", Fraction(1)),
}
# attribute (lower case) -> (node fact, the fact's units per unit of the attribute, whether
# the attribute is a whole number). SI00 is HS06 x 250, as DIRAC converts.
_NODE_ATTRIBUTES = {
    "mjf_machine_hs06": ("hs06", Fraction(1), False),
    "gluehostbenchmarksi00": ("hs06_per_cpu", Fraction(1, 250), True),
    "mjf_machine_total_cpu": ("total_cpu", Fraction(1), True),
}
_TAG_LIST = "gluehostapplicationsoftwareruntimeenvironment"
_SCOPES = ("other", "target", "my")
# Real requirements nest a few levels; a deeper one is refused before it costs time.
_MAX_DEPTH = 100
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "=?=": "=?="}
# A hs06 value has two decimals (how MJF writes it), so `> v` is `>= v + 0.01`.
_HS06_STEP = Fraction(1, 100)

CONDITIONAL_WARNING = ("`{clause}` depends on the node, so the job is given what both "
                       "branches ask")


class _Keyed:
    """A node clause equal to, and hashed as, another of its kind with the same ``key``:
    the reducer holds its clauses in a set, so a tag given 60,000 times costs one look-up
    each, not a comparison with every clause held."""

    __slots__ = ()

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


class NodeBound(_Keyed):
    """A node fact at least ``value``: ``hs06_per_cpu >= 10``."""

    __slots__ = ("clause", "fact", "value")

    def __init__(self, fact: str, value: Fraction, clause: str):
        self.fact, self.value, self.clause = fact, value, clause

    @property
    def key(self) -> tuple:
        return ("at least", self.fact, self.value)

    def __repr__(self) -> str:
        return f"NodeBound({self.fact} >= {self.value})"


class Tag(_Keyed):
    """A tag (a boolean node fact of that name) the node must have."""

    __slots__ = ("clause", "name")

    def __init__(self, name: str, clause: str):
        self.name, self.clause = name, clause

    @property
    def key(self) -> tuple:
        return ("tag", self.name)

    def __repr__(self) -> str:
        return f"Tag({self.name})"


class AnyOf(_Keyed):
    """Alternatives, each one node clause: ``a || b``."""

    __slots__ = ("choices", "clause")

    def __init__(self, choices: list, clause: str):
        self.choices, self.clause = choices, clause

    @property
    def key(self) -> tuple:
        return ("any of", *(choice.key for choice in self.choices))

    def __repr__(self) -> str:
        return f"AnyOf({self.choices!r})"


class Needs:
    """What a job's requirements ask of its slot and node."""

    def __init__(self):
        self.low: dict[str, int] = {}
        self.high: dict[str, int] = {}
        self.whole_node = False
        self.node: list = []
        # The node clauses already held: a JDL may list tens of thousands of tags, and a
        # scan of the list per tag made reducing it quadratic (60,000 tags: minutes).
        self._node_held: set = set()
        # DIRAC keys its Matcher decides before a job reaches a batch system (Site, ...).
        self.elsewhere: dict[str, list[str]] = {}
        self.warnings: list[str] = []
        # The clause that set each bound, for messages.
        self.why: dict[str, str] = {}

    def at_least(self, kind: str, value: int, clause: str) -> None:
        # A request of 0 is none at all (Slurm's --time=0 is no limit): one is the least.
        value = max(value, 1)
        if value > self.low.get(kind, -1):
            self.low[kind], self.why[kind] = value, clause
        self._check(kind, clause)

    def at_most(self, kind: str, value: int, clause: str) -> None:
        if value < 1:
            raise Unexpressible(f"`{_excerpt(clause)}` asks for no "
                                f"{kind.replace('_', ' ')}: no job runs with none")
        if kind not in self.high or value < self.high[kind]:
            self.high[kind] = value
            if kind not in self.low:  # the bound is then the request (:meth:`request`)
                self.why[kind] = clause
        self._check(kind, clause)

    def _check(self, kind: str, clause: str) -> None:
        if kind in self.low and kind in self.high and self.low[kind] > self.high[kind]:
            raise Unexpressible(f"`{_excerpt(clause)}` contradicts another clause: no "
                                f"{kind.replace('_', ' ')} satisfies both")

    def add_node(self, clause) -> None:
        if clause not in self._node_held:
            self._node_held.add(clause)
            self.node.append(clause)

    def request(self, kind: str) -> int | None:
        """What to ask for: the least the requirement allows; with only an upper bound,
        the bound itself (a limit no larger), except cores (one)."""
        if kind in self.low:
            return self.low[kind]
        if kind in self.high:
            return 1 if kind == "cores" else self.high[kind]
        return None

    def to_json(self) -> dict:
        node = [_clause_json(clause) for clause in self.node]
        out: dict = {kind: self.request(kind) for kind in REQUEST_KINDS
                     if self.request(kind) is not None}
        if self.whole_node:
            out["whole_node"] = True
        if node:
            out["node"] = node
        if self.elsewhere:
            out["matched_before_the_batch_system"] = self.elsewhere
        return out


def _clause_json(clause):
    if isinstance(clause, Tag):
        return {"tag": clause.name}
    if isinstance(clause, NodeBound):
        return {"fact": clause.fact, "at_least": float(clause.value)}
    return {"any_of": [_clause_json(choice) for choice in clause.choices]}


# --- ClassAd requirements ---------------------------------------------------------


def expression_needs(expression: str) -> Needs:
    """The needs of a ClassAd ``Requirements``; raises Unexpressible (one line)."""
    text = expression.strip()
    if not text:
        raise Unexpressible("the requirement is empty")
    try:
        return _expression_needs(text)
    except RecursionError:
        raise Unexpressible("the requirement is nested too deeply to be reduced") from None
    except MemoryError:
        raise Unexpressible("the requirement is too large to be reduced") from None


def _expression_needs(text: str) -> Needs:
    library = _library()
    try:
        tokens = _tokens(text)
    except _SyntaxProblem as problem:
        raise Unexpressible(f"the requirement {problem}") from None
    # The library leaves scoped references (other.X) alone when flattening: the slot is
    # the only ad here, so each is its bare name (as `mjf match` reads them).
    unscoped, skip = [], 0
    for index, token in enumerate(tokens):
        if skip:
            skip -= 1
            continue
        if (token.kind == "name" and token.text.lower() in _SCOPES
                and index + 2 < len(tokens) and tokens[index + 1].text == "."
                and tokens[index + 2].kind == "name"):
            skip = 1
            continue
        unscoped.append(token.text)
    try:
        tree = library.ExprTree(" ".join(unscoped))
        reduced = library.ClassAd().flatten(tree)
    except (library.ClassAdException, ValueError):
        raise Unexpressible(f"the requirement does not parse as a ClassAd expression: "
                            f"{_excerpt(text)}") from None
    reduced_text = _literal(reduced, library) if not isinstance(reduced, library.ExprTree) \
        else str(reduced)
    needs = Needs()
    reduced_tokens = _tokens(reduced_text)
    if len([t for t in reduced_tokens if t.kind == "op"]) > MAX_OPERATORS:
        raise Unexpressible("the reduced requirement is too large")
    _clause(reduced_text, reduced_tokens, needs, 0)
    return needs


def _literal(value, library) -> str:
    """A value flatten computed whole, as ClassAd text."""
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, library.Value):
        return value.name.lower()
    if isinstance(value, str):
        return library.quote(value)
    return str(value)


def _clause(text: str, tokens, needs: Needs, depth: int) -> None:
    if depth > _MAX_DEPTH or sum(1 for t in tokens[:_MAX_DEPTH + 2] if t.text == "(") \
            > _MAX_DEPTH:
        raise Unexpressible("the requirement is nested too deeply to be reduced")
    text, tokens = strip_parentheses(text, tokens)
    if len(tokens) == 1 and tokens[0].kind == "name" and tokens[0].text.lower() == "true":
        return
    if len(tokens) == 1 and tokens[0].text.lower() in ("false", "undefined", "error"):
        raise Unexpressible(f"the requirement reduces to {tokens[0].text.lower()}: no node "
                            "satisfies it")
    split = split_clause(text, tokens)
    if split is None:
        tag = _member(tokens)
        if tag is None:
            raise Unexpressible(f"`{_excerpt(text)}` cannot be expressed as submit options: "
                                "it is no comparison of a slot attribute with a constant")
        needs.add_node(Tag(tag, text))
        return
    kind, parts = split
    if kind == "&&":
        for part, part_tokens in parts:
            _clause(part, part_tokens, needs, depth + 1)
    elif kind == "?":
        _, (yes, yes_tokens), (no, no_tokens) = parts
        needs.warnings.append(CONDITIONAL_WARNING.format(clause=_excerpt(text)))
        _clause(yes, yes_tokens, needs, depth + 1)
        _clause(no, no_tokens, needs, depth + 1)
    elif kind == "||":
        choices = []
        for part, part_tokens in parts:
            alone = Needs()
            _clause(part, part_tokens, alone, depth + 1)
            if alone.low or alone.high or len(alone.node) != 1 \
                    or isinstance(alone.node[0], AnyOf):
                raise Unexpressible(f"`{_excerpt(text)}` cannot be expressed as submit "
                                    "options: only alternatives of single node facts or "
                                    "tags can")
            choices.append(alone.node[0])
        needs.add_node(AnyOf(choices, text))
    else:
        (_, left_tokens), operator, (_, right_tokens) = parts
        _comparison(text, left_tokens, operator, right_tokens, needs)


def _member(tokens) -> str | None:
    """X of ``member("X", GlueHostApplicationSoftwareRunTimeEnvironment)``, else None."""
    texts = [t.text for t in tokens]
    if (len(tokens) == 6 and texts[0].lower() == "member" and texts[1] == "("
            and tokens[2].kind == "string" and texts[3] == ","
            and texts[4].lower() == _TAG_LIST and texts[5] == ")"):
        name = texts[2][1:-1]
        return name if _is_tag(name) else None
    return None


def _is_tag(name: str) -> bool:
    """A tag is a node fact's name in every batch system: letters, digits, ``_``, ``-``,
    ``.``, starting with a letter."""
    return bool(name) and name.isascii() and name[0].isalpha() and len(name) <= 64 \
        and name.replace("_", "a").replace("-", "a").replace(".", "a").isalnum()


def _comparison(text: str, left, operator: str, right, needs: Needs) -> None:
    def cannot(why: str) -> Unexpressible:
        return Unexpressible(f"`{_excerpt(text)}` cannot be expressed as submit options: "
                             f"{why}")

    if _attribute(left) is None:
        left, right, operator = right, left, _FLIP.get(operator, operator)
    name, value = _attribute(left), _number(right)
    if name is None:
        raise cannot("it compares no slot attribute")
    if operator not in (">", ">=", "<", "<=", "==", "=?="):
        raise cannot(f"{operator} is not a bound")
    if value is None:
        raise cannot("the other side is no number")
    key = name.lower()
    if key in _REQUESTS:
        kind, factor = _REQUESTS[key]
        if operator in (">", ">="):  # the attribute's least whole value
            least = math.floor(value) + 1 if operator == ">" else math.ceil(value)
            needs.at_least(kind, math.ceil(least * factor), text)
        if operator in ("<", "<="):
            most = math.ceil(value) - 1 if operator == "<" else math.floor(value)
            needs.at_most(kind, math.floor(most * factor), text)
        if operator in ("==", "=?="):
            if value != math.floor(value):
                raise Unexpressible(f"`{_excerpt(text)}`: {name} is a whole number")
            needs.at_least(kind, math.ceil(value * factor), text)
            needs.at_most(kind, math.floor(value * factor), text)
        return
    if key in _NODE_ATTRIBUTES:
        fact, factor, whole = _NODE_ATTRIBUTES[key]
        if operator not in (">", ">="):
            raise cannot(f"a node's {fact} can only be asked to be at least a value")
        if operator == ">":
            least = math.floor(value) + 1 if whole else \
                (math.floor(value / _HS06_STEP) + 1) * _HS06_STEP
        else:
            least = math.ceil(value) if whole else value
        needs.add_node(NodeBound(fact, least * factor, text))
        return
    raise cannot(f"{name} is no cores, memory, time, hs06, hs06 per CPU or total_cpu")


def _attribute(tokens) -> str | None:
    if len(tokens) == 1 and tokens[0].kind == "name" \
            and tokens[0].text.lower() not in ("true", "false", "undefined", "error"):
        return tokens[0].text
    return None


# A number larger than this is no count, amount or time a batch system takes.
_MAX_NUMBER = 10**18


def _number(tokens) -> Fraction | None:
    texts = [t.text for t in tokens]
    sign = 1
    if len(texts) == 2 and texts[0] in ("-", "+"):
        sign, tokens = (-1 if texts[0] == "-" else 1), tokens[1:]
    if len(tokens) != 1 or tokens[0].kind != "number" or len(tokens[0].text) > 40:
        return None
    value = sign * Fraction(tokens[0].text)
    return value if abs(value) <= _MAX_NUMBER else None


# --- DIRAC JDLs -----------------------------------------------------------------------

# Keys DIRAC's Matcher decides when it gives a job to a pilot, before any batch system.
_ELSEWHERE = ("Site", "GridCE", "BannedSite", "Platform", "JobType")


def jdl_needs(jdl_text: str, hs06_per_cpu: float | None) -> Needs:
    """The needs of a JDL: a gLite one's Requirements expression, or a DIRAC job's keys."""
    try:
        return _jdl_needs(jdl_text, hs06_per_cpu)
    except RecursionError:
        raise Unexpressible("the JDL is nested too deeply to be reduced") from None
    except MemoryError:
        raise Unexpressible("the JDL is too large to be reduced") from None


def _jdl_needs(jdl_text: str, hs06_per_cpu: float | None) -> Needs:
    from .dirac import DiracResource, _integer, _JDLProblem, _strings, _yes

    reader = DiracResource({})
    library = reader._library
    try:
        ad = reader._parse(jdl_text)
        section = "Requirements" in ad and isinstance(ad["Requirements"], library.ClassAd)

        def number(key: str) -> int | None:
            return _integer(key, reader._value(ad, key)) if key in ad else None

        # A gLite JDL's Requirements expression; its own keys and any DIRAC keys beside it
        # add to what it asks, none is passed over.
        needs = (expression_needs(str(ad.lookup("Requirements")))
                 if "Requirements" in ad and not section else Needs())
        _glite_keys(needs, number,
                    lambda key: key in ad and _yes(key, reader._value(ad, key)))
        processors = number("NumberOfProcessors")
        least = processors if processors is not None else number("MinNumberOfProcessors")
        if least is not None:
            needs.at_least("cores", max(least, 1), "NumberOfProcessors" if processors
                           is not None else "MinNumberOfProcessors")
        most = number("MaxNumberOfProcessors") if processors is None else None
        if most is not None:
            needs.at_most("cores", most, "MaxNumberOfProcessors")
        if "WholeNode" in ad and _yes("WholeNode", reader._value(ad, "WholeNode")):
            needs.whole_node = True
        for key in ("MinRAM", "MaxRAM"):
            ram = number(key)
            if ram is not None:
                needs.at_least("memory_mib", ram, key)
        minimum, limit = number("MinRAM"), number("MaxRAM")
        if minimum is not None and limit is not None and minimum > limit:
            raise Unexpressible(f"MinRAM = {minimum} is more than MaxRAM = {limit}")
        cputime = number("CPUTime")
        if cputime is not None:
            if not hs06_per_cpu:
                raise Unexpressible(f"CPUTime = {cputime} (HS06 s) needs the HS06 per CPU to "
                                    "become wall time: give --hs06-per-cpu or set [submit] "
                                    "hs06_per_cpu")
            needs.at_least("wall_secs", math.ceil(Fraction(cputime)
                                                  / Fraction(str(hs06_per_cpu))), "CPUTime")
        for key in ("Tag", "Tags"):
            for tag in _strings(key, reader._value(ad, key)) if key in ad else []:
                _dirac_tag(key, tag, needs)
        for key in _ELSEWHERE:
            if key in ad:
                needs.elsewhere[key] = _strings(key, reader._value(ad, key))
        if section:
            raise Unexpressible("a Requirements = [ ... ] section (RFC #7) cannot be "
                                "expressed as submit options: give its keys as the job's")
    except _JDLProblem as problem:
        raise Unexpressible(str(problem)) from None
    return needs


def _glite_keys(needs: Needs, number, yes) -> None:
    """A gLite JDL's own placement keys: ``CpuNumber`` CPUs in all, ``SMPGranularity`` of
    them on each host, ``HostNumber`` hosts, ``WholeNodes``. The options place a job on
    one node, so a job that spans hosts is refused, never shrunk onto one."""
    cpus, per_host, hosts = (number(key) for key in ("CpuNumber", "SMPGranularity",
                                                      "HostNumber"))
    if hosts is not None and hosts > 1:
        raise Unexpressible(f"HostNumber = {hosts} asks for {hosts} hosts: the options "
                            "place a job on one node")
    if cpus is not None and per_host is not None and cpus > per_host:
        raise Unexpressible(f"CpuNumber = {cpus} with SMPGranularity = {per_host} spans "
                            "hosts: the options place a job on one node")
    for key, value in (("CpuNumber", cpus), ("SMPGranularity", per_host)):
        if value is not None:
            needs.at_least("cores", value, key)
    if yes("WholeNodes"):
        needs.whole_node = True


def _dirac_tag(key: str, tag: str, needs: Needs) -> None:
    """DIRAC's own tags are what they stand for; any other is a node's tag."""
    count = tag[:-len("Processors")] if tag.endswith("Processors") else ""
    if count.isascii() and count.isdigit() and len(count) <= 6:
        needs.at_least("cores", int(count), f"{key} {tag}")
    elif tag == "MultiProcessor":
        needs.at_least("cores", 2, f"{key} {tag}")
    elif tag == "WholeNode":
        needs.whole_node = True
    elif _is_tag(tag):
        needs.add_node(Tag(tag, f"{key} {tag}"))
    else:
        raise Unexpressible(f"{key} {_excerpt(repr(tag))} is no tag a batch system can "
                            "match: letters, digits, _ - . starting with a letter")
