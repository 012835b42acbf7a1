"""Job records: reading a record's JSON back, what it says about the promise
(overruns, figures), and the totals over many (summary), against hand-computed numbers."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mjf_hooks.records.job import (
    DELIVERED,
    REQUESTED,
    Record,
    figures,
    overruns,
    record_from_json,
    record_json,
    summary,
)
from tests.unit.records.test_job import full

GIB, MIB = 2**30, 2**20



def same(one: Record, other: Record) -> bool:
    return all(getattr(one, name) == getattr(other, name) for name in Record.__slots__)


# --- record_from_json -------------------------------------------------------------

def test_a_full_record_round_trips():
    record = full()
    data = record_json(record)
    back = record_from_json(data)
    assert same(back, record)
    assert record_json(back) == data


def test_a_full_record_round_trips_through_json_text():
    record = full()
    back = record_from_json(json.loads(json.dumps(record_json(record), sort_keys=True)))
    assert same(back, record)


def test_a_minimal_record_round_trips():
    record = Record("42")
    assert record_json(record) == {"job_id": "42"}
    back = record_from_json({"job_id": "42"})
    assert same(back, record) and back.sources == {}
    assert all(getattr(back, name) is None for name in REQUESTED + DELIVERED)


def test_a_record_with_only_some_delivered_values_round_trips():
    record = Record("7", end_time=1700000100, cpu_secs=12.5,
                    sources={"end_time": "the clock", "cpu_secs": "HTCondor job ad"})
    back = record_from_json(record_json(record))
    assert same(back, record)
    assert back.sources == {"end_time": "the clock", "cpu_secs": "HTCondor job ad"}


def test_the_derived_consumption_rate_is_not_read_back_as_a_value():
    data = record_json(full())
    assert "consumption_rate" in data["delivered"]
    assert not hasattr(record_from_json(data), "consumption_rate_value")
    assert record_from_json(data).consumption_rate == full().consumption_rate


@pytest.mark.parametrize(("data", "reason"), [
    ([], "a record is a JSON object"),
    ("x", "a record is a JSON object"),
    (None, "a record is a JSON object"),
    ({"job_id": "1", "requested": [8]}, "requested and delivered must be objects"),
    ({"job_id": "1", "requested": None}, "requested and delivered must be objects"),
    ({"job_id": "1", "requested": "allocated_cpu=8"}, "requested and delivered must be"),
    ({"job_id": "1", "delivered": [1]}, "requested and delivered must be objects"),
    ({"job_id": "1", "delivered": {"cpu_secs": {"value": 5}}},
     "delivered cpu_secs must be {value, source}"),
    ({"job_id": "1", "delivered": {"cpu_secs": 5}}, "delivered cpu_secs must be"),
    ({"job_id": "1", "delivered": {"wall_secs": {"value": 5, "source": 3}}},
     "delivered wall_secs must be"),
    ({"job_id": "1", "delivered": {"wall_secs": {"value": 5, "source": ""}}},
     "wall_secs is given without the source"),
    ({"job_id": "1", "delivered": {"end_time": {"value": "soon", "source": "x"}}},
     "end_time must be a number"),
    ({"job_id": "1", "requested": {"allocated_cpu": "8"}}, "allocated_cpu must be a number"),
    ({"job_id": "1", "requested": {"allocated_cpu": -1}}, "allocated_cpu must be a number from 0"),
    ({"job_id": "1", "requested": {"allocated_cpu": True}}, "allocated_cpu must be a number"),
    ({}, "a record needs a non-empty job_id"),
    ({"job_id": ""}, "a record needs a non-empty job_id"),
    ({"job_id": 42}, "a record needs a non-empty job_id"),
    ({"job_id": None}, "a record needs a non-empty job_id"),
    ({"job_id": "1", "user": 1000}, "user must be text"),
    ({"job_id": "1", "benchmark": "SPECint"}, "benchmark must be HEPSPEC or HEPscore23"),
])
def test_a_malformed_record_is_refused(data, reason):
    with pytest.raises(ValueError) as caught:
        record_from_json(data)
    assert reason in str(caught.value)


def test_unknown_entries_are_ignored():
    back = record_from_json({"job_id": "1", "requested": {"colour": "red"},
                             "delivered": {"consumption_rate": {"value": 9}}, "extra": 1})
    assert same(back, Record("1"))


# --- overruns and figures ---------------------------------------------------------

def job(**values) -> Record:
    sources = {name: "test" for name in DELIVERED if values.get(name) is not None}
    return Record("j", sources=sources, **values)


@pytest.mark.parametrize(("values", "expected"), [
    ({}, []),
    # wall: over only strictly past the limit
    ({"wall_secs": 3601, "wall_limit_secs": 3600}, ["wall"]),
    ({"wall_secs": 3600, "wall_limit_secs": 3600}, []),
    ({"wall_secs": 3601}, []),
    ({"wall_limit_secs": 3600}, []),
    # memory
    ({"peak_memory_bytes": 2 * GIB + 1, "max_rss_bytes": 2 * GIB}, ["memory"]),
    ({"peak_memory_bytes": 2 * GIB, "max_rss_bytes": 2 * GIB}, []),
    ({"peak_memory_bytes": 2 * GIB}, []),
    # cpu
    ({"cpu_secs": 7200.5, "cpu_limit_secs": 7200}, ["cpu"]),
    ({"cpu_secs": 7200, "cpu_limit_secs": 7200}, []),
    # cores: more CPU than the cores give in the wall time plus 1 s (whole-second clocks),
    # with 1% slack: 1 core for 100 s allows 1.01 * 101 = 102.01
    ({"cpu_secs": 102, "wall_secs": 100, "allocated_cpu": 1}, []),
    ({"cpu_secs": 100.9, "wall_secs": 100, "allocated_cpu": 1}, []),
    ({"cpu_secs": 103, "wall_secs": 100, "allocated_cpu": 1}, ["cores"]),
    # 8 cores: 1.01 * 8 * 101 = 816.08; 816 not over, 817 over
    ({"cpu_secs": 816, "wall_secs": 100, "allocated_cpu": 8}, []),
    ({"cpu_secs": 817, "wall_secs": 100, "allocated_cpu": 8}, ["cores"]),
    # a 3 s job (whole seconds) on 2 cores that used 6.5 s: its cores, fully, not more
    ({"cpu_secs": 6.5, "wall_secs": 3, "allocated_cpu": 2}, []),
    # no rate without a wall time or a core count
    ({"cpu_secs": 500, "wall_secs": 0, "allocated_cpu": 1}, []),
    ({"cpu_secs": 500, "wall_secs": 100}, []),
    # everything at once, in the documented order
    ({"wall_secs": 200, "wall_limit_secs": 100, "peak_memory_bytes": 2, "max_rss_bytes": 1,
      "cpu_secs": 800, "cpu_limit_secs": 100, "allocated_cpu": 2},
     ["wall", "memory", "cpu", "cores"]),
])
def test_overruns(values, expected):
    assert overruns(job(**values)) == expected


def test_figures_of_a_full_record():
    # rate 43200 / (7200.4 * 8) = 0.74996..., peak (9.5 GiB) / 16 GiB = 0.59375,
    # wall 7200.4 / 172800, cpu 43200 / 1382400 = 0.03125
    found = figures(full())
    assert found["cpu_efficiency"] == pytest.approx(43200 / (7200.4 * 8))
    assert found["memory_used_fraction"] == 0.59375
    assert found["wall_used_fraction"] == pytest.approx(7200.4 / 172800)
    assert found["cpu_used_fraction"] == 0.03125
    assert found["over"] == []


def test_figures_are_none_where_a_side_is_unknown():
    assert figures(Record("x")) == {"cpu_efficiency": None, "memory_used_fraction": None,
                                    "wall_used_fraction": None, "cpu_used_fraction": None,
                                    "over": []}
    # A zero limit is no promise to divide by.
    found = figures(job(wall_secs=10, wall_limit_secs=0, peak_memory_bytes=5, max_rss_bytes=0))
    assert found["wall_used_fraction"] is None and found["memory_used_fraction"] is None


def test_figures_of_an_overrunning_job():
    # 4 cores for 1000 s = 4000 core-seconds; 4400 used -> 1.1
    found = figures(job(allocated_cpu=4, wall_secs=1000, cpu_secs=4400, wall_limit_secs=500,
                        peak_memory_bytes=3 * GIB, max_rss_bytes=2 * GIB))
    assert found["cpu_efficiency"] == pytest.approx(1.1)
    assert found["memory_used_fraction"] == 1.5
    assert found["wall_used_fraction"] == 2.0
    assert found["cpu_used_fraction"] is None
    assert found["over"] == ["wall", "memory", "cores"]


# --- summary ----------------------------------------------------------------------

def test_the_summary_of_nothing():
    assert summary([]) == {
        "jobs": 0, "jobs_with_cpu_figures": 0, "allocated_core_hours": 0.0,
        "used_core_hours": 0.0, "idle_core_hours": 0.0, "cpu_efficiency": None,
        "median_memory_used_fraction": None, "median_wall_used_fraction": None,
        "jobs_over_a_promise": 0, "over": {"wall": 0, "memory": 0, "cpu": 0, "cores": 0},
    }


def hand_computed() -> list[Record]:
    return [
        # A: 4 cores x 3600 s = 14400 core-s allocated, 7200 used (rate 0.5);
        #    memory 1/2 GiB = 0.5, wall 3600/7200 = 0.5; within every promise.
        job(allocated_cpu=4, wall_secs=3600, cpu_secs=7200, max_rss_bytes=2 * GIB,
            peak_memory_bytes=GIB, wall_limit_secs=7200),
        # B: 2 cores x 1800 s = 3600 core-s allocated, 3780 used (rate 1.05: cores);
        #    memory 3/2 = 1.5 (memory), wall 1800/1200 = 1.5 (wall), cpu 3780 > 3600 (cpu).
        job(allocated_cpu=2, wall_secs=1800, cpu_secs=3780, max_rss_bytes=2 * GIB,
            peak_memory_bytes=3 * GIB, wall_limit_secs=1200, cpu_limit_secs=3600),
        # C: no core count, so no CPU figures; memory 1/4 = 0.25, wall 600/2400 = 0.25.
        job(wall_secs=600, cpu_secs=500, max_rss_bytes=4 * GIB, peak_memory_bytes=GIB,
            wall_limit_secs=2400),
        # D: memory 0.75 GiB / 1 GiB = 0.75 only.
        job(max_rss_bytes=GIB, peak_memory_bytes=3 * GIB // 4),
        # E: nothing known.
        Record("e"),
    ]


def test_the_summary_of_hand_computed_records():
    totals = summary(hand_computed())
    # allocated: A 14400 + B 3600 = 18000 core-s = 5.0 core-hours
    # used:      A 7200 + B 3780  = 10980 core-s = 3.05 core-hours
    # idle:      18000 - 10980    = 7020 core-s  = 1.95 core-hours
    # efficiency 10980 / 18000 = 0.61
    assert totals["jobs"] == 5
    assert totals["jobs_with_cpu_figures"] == 2
    assert totals["allocated_core_hours"] == pytest.approx(5.0)
    assert totals["used_core_hours"] == pytest.approx(3.05)
    assert totals["idle_core_hours"] == pytest.approx(1.95)
    assert totals["cpu_efficiency"] == pytest.approx(0.61)
    # memory fractions A 0.5, B 1.5, C 0.25, D 0.75 -> sorted 0.25 0.5 0.75 1.5:
    # median (0.5 + 0.75) / 2 = 0.625
    assert totals["median_memory_used_fraction"] == pytest.approx(0.625)
    # wall fractions A 0.5, B 1.5, C 0.25 -> median 0.5
    assert totals["median_wall_used_fraction"] == pytest.approx(0.5)
    # only B went past a promise, all four of them
    assert totals["jobs_over_a_promise"] == 1
    assert totals["over"] == {"wall": 1, "memory": 1, "cpu": 1, "cores": 1}


def test_the_summary_takes_any_iterable():
    assert summary(iter(hand_computed())) == summary(hand_computed())


def test_idle_core_hours_are_never_negative():
    # 1 core x 3600 s allocated, 3780 used (rate 1.05): idle max(0, 3600 - 3780) = 0
    totals = summary([job(allocated_cpu=1, wall_secs=3600, cpu_secs=3780)])
    assert totals["idle_core_hours"] == 0.0
    assert totals["used_core_hours"] == pytest.approx(1.05)
    assert totals["cpu_efficiency"] == pytest.approx(1.05)
    assert totals["over"]["cores"] == 1


def test_the_summary_of_a_single_job():
    # 8 cores x 7200.4 s = 57603.2 core-s = 16.0009 core-hours; 43200 used = 12 core-hours
    totals = summary([full()])
    assert totals["allocated_core_hours"] == pytest.approx(57603.2 / 3600)
    assert totals["used_core_hours"] == pytest.approx(12.0)
    assert totals["median_memory_used_fraction"] == 0.59375
    assert totals["jobs_over_a_promise"] == 0


@st.composite
def plausible_records(draw) -> Record:
    """A record whose consumption rate (where it has one) is at most 1."""
    values: dict = {}
    if draw(st.booleans()):
        values["allocated_cpu"] = draw(st.integers(1, 256))
    if draw(st.booleans()):
        values["wall_secs"] = draw(st.floats(0, 1e7, allow_nan=False))
    if draw(st.booleans()):
        if "allocated_cpu" in values and "wall_secs" in values:
            rate = draw(st.floats(0, 1))
            values["cpu_secs"] = rate * values["wall_secs"] * values["allocated_cpu"]
        else:
            values["cpu_secs"] = draw(st.floats(0, 1e9, allow_nan=False))
    for used, promised in (("peak_memory_bytes", "max_rss_bytes"),
                           ("wall_secs", "wall_limit_secs"), ("cpu_secs", "cpu_limit_secs")):
        if draw(st.booleans()):
            values[promised] = draw(st.integers(0, 2**40))
        if used == "peak_memory_bytes" and draw(st.booleans()):
            values[used] = draw(st.integers(0, 2**40))
    return job(**values)


@settings(max_examples=200, deadline=None)
@given(st.lists(plausible_records(), max_size=12))
def test_used_core_hours_never_exceed_the_allocated_and_the_counts_add_up(found):
    assert all(r.consumption_rate is None or r.consumption_rate <= 1 for r in found)
    totals = summary(found)
    assert totals["used_core_hours"] <= totals["allocated_core_hours"]
    assert totals["idle_core_hours"] == pytest.approx(
        totals["allocated_core_hours"] - totals["used_core_hours"], abs=1e-6)
    assert totals["jobs"] == len(found)
    assert totals["jobs_with_cpu_figures"] == sum(r.consumption_rate is not None for r in found)
    assert totals["over"]["cores"] == 0
    assert totals["jobs_over_a_promise"] == sum(bool(overruns(r)) for r in found)
    for name in ("wall", "memory", "cpu"):
        assert totals["over"][name] == sum(name in overruns(r) for r in found)
    assert totals["jobs_over_a_promise"] <= sum(totals["over"].values())
    assert totals["jobs_over_a_promise"] <= totals["jobs"]
    if totals["cpu_efficiency"] is not None:
        assert 0 <= totals["cpu_efficiency"] <= 1
