"""weir.Simulation: the gateways' engine on virtual time, from Python."""

import pytest

import weir

# Two routes (inline tables: the same as [[routes]] sections).
CONFIG = """
server = { listen = "127.0.0.1:8080" }
upstreams = [{ name = "up", endpoints = ["127.0.0.1:9"] }]
[[routes]]
id = "limited"
match = { path_prefix = "/limited" }
upstream = "up"
rate_limit = { algorithm = "token_bucket", rate = 2, per = "1s", burst = 2, key = ["route", "header:x-user"] }
[[routes]]
id = "guarded"
match = { path_prefix = "/guarded" }
upstream = "up"
breaker = { failure_on = ["connect_failure"], consecutive_failures = 3, cooldown = { base = "1s", max = "1s", jitter = 0.0 }, half_open = { probes = 1, successes = 1 } }
"""


def test_rate_limit_decisions_and_columns():
    sim = weir.Simulation(CONFIG)
    r = sim.run([0.0, 0.0, 0.0, 0.5, 0.6], "/limited", headers={"x-user": "a"})
    assert list(r.reason) == ["proxied", "proxied", "rate_limited", "proxied", "rate_limited"]
    assert list(r.status) == [200, 200, 429, 200, 429]
    assert r.status.format == "H" and r.duration.format == "d"
    assert list(r.attempts) == [1, 1, 0, 1, 0]
    assert r.duration[0] == 0.001  # 1 ms until .upstream() says otherwise
    assert r.summary() == {"limited": {"proxied": 3, "rate_limited": 2}}
    rec = r[2]
    assert isinstance(rec, weir.SimulatedRequest)
    assert (rec.route, rec.status, rec.reason, rec.t) == ("limited", 429, "rate_limited", 0.0)
    assert [x.status for x in r] == list(r.status)
    assert len(r) == 5 and repr(r) == "SimulationResult(requests=5)"


def test_headers_one_for_all_or_one_per_request_and_methods():
    sim = weir.Simulation(CONFIG)
    users = [{"x-user": u} for u in "aabbaa"]
    r = sim.run([0.0] * 6, ["/limited"] * 6, methods=["GET"] * 6, headers=users)
    assert list(r.reason) == ["proxied", "proxied", "proxied", "proxied", "rate_limited", "rate_limited"]
    r = sim.run([0.0] * 3, "/limited", headers={"X-User": "c"})
    assert list(r.reason) == ["proxied", "proxied", "rate_limited"]
    assert weir.Simulation(CONFIG).run([0.0], "/nowhere")[0][1:4] == ("-", 404, "no_route")


def test_outage_breaker_latency_sequence_and_determinism():
    sim = weir.Simulation(CONFIG, seed=3).upstream("up", latency=[0.005, 0.01], outages=[(1.0, 2.0)])
    ts = [i / 10 for i in range(40)]
    r = sim.run(ts, "/guarded")
    reasons = list(r.reason)
    assert reasons[:10] == ["proxied"] * 10
    assert reasons[10:13] == ["upstream_unavailable"] * 3
    assert set(reasons[13:20]) == {"circuit_open"}
    assert reasons[-1] == "proxied"
    assert list(r.duration[:2]) == [0.005, 0.01]
    again = sim.run(ts, "/guarded")
    assert list(again.reason) == reasons and list(again.duration) == list(r.duration)


def test_errors_are_seeded():
    def run(seed):
        s = weir.Simulation(CONFIG, seed=seed).upstream("up", latency=0.001, errors=0.5)
        return list(s.run([i / 100 for i in range(500)], "/guarded").status)

    assert run(1) == run(1) != run(2)


def test_config_from_a_path_and_bad_arguments(tmp_path):
    p = tmp_path / "gw.toml"
    p.write_text(CONFIG)
    assert weir.Simulation(str(p)).run([0.0], "/limited")[0].reason == "empty_key"
    bad = tmp_path / "bad.toml"
    bad.write_text("[server]\nlisten = 42\n")
    with pytest.raises(ValueError, match="bad.toml:2"):
        weir.Simulation(str(bad))
    with pytest.raises(ValueError, match="cannot read"):
        weir.Simulation(str(tmp_path / "missing.toml"))
    sim = weir.Simulation(CONFIG)
    with pytest.raises(ValueError, match="no upstream"):
        sim.upstream("nope")
    with pytest.raises(ValueError, match="errors"):
        sim.upstream("up", errors=2)
    with pytest.raises(ValueError, match="outages"):
        sim.upstream("up", outages=[(2.0, 1.0)])
    with pytest.raises(ValueError, match="times"):
        sim.run([-1.0], "/limited")
    with pytest.raises(ValueError, match="paths has 1 items"):
        sim.run([0.0, 1.0], ["/limited"])
    with pytest.raises(ValueError, match="headers has 1 items"):
        sim.run([0.0, 1.0], "/limited", headers=[{}])


def test_numpy_and_pandas_friendly():
    np = pytest.importorskip("numpy")
    sim = weir.Simulation(CONFIG)
    r = sim.run(np.linspace(0, 10, 1001), "/limited", headers={"x-user": "a"})
    st = np.asarray(r.status)
    assert st.dtype == np.uint16 and (st == 200).sum() == r.summary()["limited"]["proxied"]
    assert np.asarray(r.reason).shape == (1001,)
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError):
            r.to_pandas()
    else:
        assert len(r.to_pandas()) == 1001


def test_trace_columns_in_any_form_give_the_same_records():
    """Paths shared, repeated, distinct or not str; one headers dict, the same dict object
    repeated, equal dicts; times as ints, a tuple or a numpy array: the same run."""
    sim = weir.Simulation(CONFIG)
    ts = [0.0, 0.0, 0.0, 0.5, 0.6, 0.6]

    def key(r):
        return (list(r.route), list(r.status), list(r.reason), list(r.attempts), list(r.duration))

    base = key(sim.run(ts, "/limited", headers={"x-user": "a"}))
    same_dict = {"x-user": "a"}
    forms = [
        sim.run(ts, ["/limited"] * 6, headers=[same_dict] * 6),
        sim.run(tuple(ts), [str("/limited") + "" for _ in ts], methods=("GET",) * 6,
                headers=[{"x-user": "a"} for _ in ts]),
        sim.run([0, 0, 0, 0.5, 0.6, 0.6], "/limited", headers={"X-USER": "a"}),
    ]
    for r in forms:
        assert key(r) == base
    # Many distinct paths, some repeated by value only, one not a str (taken as str()).
    class P:
        def __str__(self):
            return "/guarded/x"

    paths = ["/limited/%d" % (i % 3) for i in range(9)] + ["/nowhere", P()]
    r = sim.run([0.0] * 11, paths, headers={"x-user": "b"})
    assert list(r.route) == ["limited"] * 9 + ["-", "guarded"]
    assert list(r.reason)[:9] == ["proxied", "proxied"] + ["rate_limited"] * 7
    # The result keeps its own copy of the times.
    r = sim.run(ts, "/limited")
    ts.append(9.0)
    assert len(r.t) == 6 and len(r) == 6


def test_bad_items_are_named_by_index():
    sim = weir.Simulation(CONFIG)
    with pytest.raises(ValueError, match=r"times\[2\] must be seconds >= 0, got -1"):
        sim.run([0.0, 1.0, -1.0], "/limited")
    with pytest.raises(ValueError, match=r"times\[1\] must be a number of seconds, got str"):
        sim.run([0.0, "soon"], "/limited")
    with pytest.raises(ValueError, match=r"times\[0\] must be seconds >= 0, got NaN"):
        sim.run([float("nan")], "/limited")
    with pytest.raises(ValueError, match="methods has 1 items but times has 2"):
        sim.run([0.0, 1.0], "/limited", methods=["GET"])


def test_the_calendar_follows_simulated_time(tmp_path):
    # A monthly quota of 2 from 2026-01-31T23:00:00Z: the third request is refused, and one
    # two simulated hours later falls in February's period.
    config = f"""
server = {{ listen = "127.0.0.1:8080" }}
quota = {{ dir = "{tmp_path}" }}
upstreams = [{{ name = "up", endpoints = ["127.0.0.1:9"] }}]
[[routes]]
id = "q"
match = {{ path_prefix = "/q" }}
upstream = "up"
quota = {{ limit = 2, period = "month", key = ["route"] }}
"""
    jan_31_23h = 1_769_900_400
    r = weir.Simulation(config, start=jan_31_23h).run([0.0, 60.0, 120.0, 7200.0], "/q")
    assert list(r.reason) == ["proxied", "proxied", "quota_exhausted", "proxied"]
    with pytest.raises(ValueError, match="start must be Unix seconds"):
        weir.Simulation(config, start=-1)
    with pytest.raises(ValueError, match="start must be Unix seconds"):
        weir.Simulation(config, start="now")
