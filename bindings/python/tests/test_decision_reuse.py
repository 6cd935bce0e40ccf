"""`Decision` objects are recycled only when nothing refers to them: a decision a caller
holds never changes, whatever the limiter decides next."""

import gc
import sys
import threading

import weir


def fields(d):
    return (d.allowed, d.remaining, d.retry_after, d.delay, d.reset_after)


def test_held_decisions_never_change():
    c = weir.ManualClock()
    tb = weir.TokenBucket(1, 1.0, 2, clock=c)
    a = tb.try_acquire()
    a_fields = fields(a)
    b = tb.try_acquire()
    d = tb.try_acquire()  # rejected
    assert a is not b and b is not d and a is not d
    assert fields(a) == a_fields == (True, 1, 0.0, 0.0, 1.0)
    assert fields(b)[:2] == (True, 0)
    assert fields(d)[:2] == (False, 0) and d.retry_after == 1.0


def test_a_list_of_decisions_matches_fresh_objects():
    c = weir.ManualClock()
    tb = weir.TokenBucket(2, 1.0, 3, clock=c)
    kept = []
    for i in range(40):
        c.set(i * 0.1)
        kept.append(tb.try_acquire())
    assert len({id(d) for d in kept}) == len(kept)
    # the same calls on a fresh bucket, each decision read at once and dropped
    c2 = weir.ManualClock()
    tb2 = weir.TokenBucket(2, 1.0, 3, clock=c2)
    expected = []
    for i in range(40):
        c2.set(i * 0.1)
        expected.append(fields(tb2.try_acquire()))
    assert [fields(d) for d in kept] == expected


def test_dropped_decisions_are_reused_and_still_right():
    c = weir.ManualClock()
    tb = weir.TokenBucket(1, 1.0, 1, clock=c)
    first = id(tb.try_acquire())  # admitted, then dropped
    d = tb.try_acquire()  # may reuse the dropped object: must say "rejected"
    assert not d and d.remaining == 0 and d.retry_after == 1.0
    assert id(d) == first  # reused (CPython: the object was freed from the slot only)
    assert sys.getrefcount(d) >= 2


def test_decisions_as_dict_keys_and_in_sets_keep_their_hash():
    c = weir.ManualClock()
    tb = weir.TokenBucket(1, 1.0, 1, clock=c)
    a = tb.try_acquire()
    seen = {a: "first"}
    h = hash(a)
    del a
    for _ in range(5):
        tb.try_acquire()  # rejections: the dict's key must not turn into one
    (k,) = seen
    assert hash(k) == h and k.allowed and seen[k] == "first"


def test_every_limiter_and_peek_hand_out_stable_objects():
    c = weir.ManualClock()
    for lim in (
        weir.TokenBucket(1, 1.0, 1, clock=c),
        weir.LeakyBucket(1, 1.0, 1, delay=1, clock=c),
        weir.FixedWindow(1, 1.0, clock=c),
        weir.SlidingWindow(1, 1.0, clock=c),
        weir.SlidingLog(1, 1.0, clock=c),
    ):
        p = lim.peek()
        ok = lim.try_acquire()
        later = [lim.try_acquire() for _ in range(3)]
        read_then = [fields(d) for d in later]
        for _ in range(3):
            lim.try_acquire()
        assert p.allowed and ok.allowed, lim
        assert [fields(d) for d in later] == read_then, lim
        # the peek said what the acquisition then did, and still says it
        assert fields(p) == fields(ok), lim


def test_threads_each_keep_their_own_decisions():
    tb = weir.TokenBucket(1000, 1.0, 1000, clock=weir.ManualClock())
    out = {}

    def run(n):
        mine = [tb.try_acquire() for _ in range(200)]
        out[n] = [(d.allowed, d.remaining) for d in mine], mine

    ts = [threading.Thread(target=run, args=(n,)) for n in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    gc.collect()
    # 800 admissions from a bucket of 1000 on a stopped clock: every remaining value
    # 999..200 handed out exactly once, and the objects still say what they said
    remaining = sorted(r for n in out for _, r in out[n][0])
    assert remaining == list(range(200, 1000))
    for n in out:
        read_then, objs = out[n]
        assert [(d.allowed, d.remaining) for d in objs] == read_then
