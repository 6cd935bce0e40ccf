"""weir.Quota: the gateway's quota periods and per-key decisions on a manual clock."""

import calendar

import pytest

import weir

DEC_2026 = calendar.timegm((2026, 12, 2, 0, 49, 47))


def test_month_period_names_bounds_and_retry_after():
    clock = weir.ManualClock(start=DEC_2026)
    q = weir.Quota(2, "month", clock=clock)
    assert q.period() == "2026-12"
    start, end = q.period_bounds()
    assert (start, end) == (calendar.timegm((2026, 12, 1, 0, 0, 0)), calendar.timegm((2027, 1, 1, 0, 0, 0)))
    assert q.consume("acme").allowed
    d = q.consume("acme")
    assert d.allowed and d.remaining == 0
    d = q.consume("acme")
    assert not d and d.retry_after == pytest.approx(end - DEC_2026)
    clock.set(end)
    assert q.period() == "2027-01"
    assert q.used("acme") == 0 and q.consume("acme").allowed


def test_event_ids_are_idempotent_and_adjustments_are_events():
    q = weir.Quota(3, 10, clock=weir.ManualClock(start=105.5))
    assert q.period() == "100"
    for _ in range(3):
        assert q.consume("k", event_id="ev-1").allowed
    assert q.used("k") == 1
    assert q.consume("k", cost=2).allowed
    assert not q.consume("k")
    assert q.adjust("k", 2, "top-up") and not q.adjust("k", 2, "top-up")
    assert (q.adjusted("k"), q.remaining("k")) == (2, 2)
    q.adjust("k", -5, "debit")
    assert not q.consume("k", cost=0), "over the limit after a debit: even cost 0"


def test_bad_arguments_are_value_errors():
    for limit, period in [(0, "day"), (1, "week"), (1, 0), (1, 1.5)]:
        with pytest.raises(ValueError):
            weir.Quota(limit, period)
    assert weir.Quota(1, "day").period().count("-") == 2
