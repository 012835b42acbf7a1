"""DIRAC JDL: would DIRAC's Matcher give this job to a pilot presenting this resource?

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

A JDL whose ``Requirements`` is an expression (gLite) is judged by :mod:`.classad`:
see :func:`jdl_requirements`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import Verdict, _excerpt, _judged, _library, _unreadable
from .classad import ClassAdSlot, _SyntaxProblem, _tokens, closes_at_end

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
        if not closes_at_end(tokens):
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
