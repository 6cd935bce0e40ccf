"""Trace replay: input conversion and the bulk result type (see ``weir.replay``)."""

from __future__ import annotations

import sys
from array import array
from typing import Any, Iterator, NamedTuple, Optional

from weir import _weir

try:
    import ctypes
except ImportError:  # a Python built without ctypes: large results are copied once
    ctypes = None  # type: ignore[assignment]

_NATIVE_F64 = ("d", "@d", "=d", "<d" if sys.byteorder == "little" else ">d")
_NATIVE_U64 = {"Q", "@Q", "=Q", "L" if array("L").itemsize == 8 else "Q"}
_NATIVE_I64 = {"q", "@q", "=q", "l" if array("l").itemsize == 8 else "q"}


def _buffer(obj: Any) -> Optional[memoryview]:
    if isinstance(obj, (str, bytes, bytearray)):
        raise TypeError(
            "must be a sequence or buffer of numbers, not " + type(obj).__name__
        )
    try:
        return memoryview(obj)
    except TypeError:
        return None


# The native side reads a 1-D memoryview of 8-byte native items a chunk at a time (no copy
# of the whole trace); anything else is converted into an `array` first.


def _native(obj: Any, name: str, formats: Any) -> tuple[Optional[memoryview], Any]:
    """`(view, None)` when `obj` is a 1-D buffer of 8-byte items in one of `formats` (used as
    is), else `(None, values)` with the values to convert (a buffer's as a list)."""
    try:
        m = _buffer(obj)
    except TypeError as e:
        raise TypeError(f"{name} {e}") from None
    if m is None:
        return None, obj
    if m.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got {m.ndim} dimensions")
    if m.itemsize == 8 and m.format in formats:
        return m, None
    return None, m.tolist()


def _column(
    obj: Any, name: str, formats: Any, typecode: str, what: str, overflow: Any = None
) -> memoryview:
    """`obj` as a 1-D memoryview of `typecode` items: as is when native, else converted.
    `overflow(values)` builds the error for a value out of range (none: re-raised)."""
    m, values = _native(obj, name, formats)
    if m is not None:
        return m
    try:
        return memoryview(array(typecode, values))
    except OverflowError:
        if overflow is None:
            raise
        raise overflow(values) from None
    except TypeError as e:
        raise TypeError(f"{name} must be a sequence or buffer of {what}: {e}") from None


def _times_column(times: Any) -> memoryview:
    return _column(times, "times", _NATIVE_F64, "d", "float seconds")


def _cost_overflow(costs: Any) -> ValueError:
    bad = next((c for c in costs if not 0 <= c < 2**64), None)
    return ValueError(f"costs must be integers in 0..=2**64-1, got {bad!r}")


def _costs_column(costs: Any) -> memoryview:
    return _column(costs, "costs", _NATIVE_U64, "Q", "ints", _cost_overflow)


# ctypes array types over `_weir._Columns` mappings, by mapping length (whole 2 MiB pages,
# so few distinct lengths; ctypes itself caches every array type it makes).
_VIEW_TYPES: dict = {}


def _view(columns: Any) -> memoryview:
    """A `memoryview` of a result's bytes: as is for a `bytes` or an `out` buffer; for a
    large result (`_weir._Columns`, a read-only memory map the native side owns; abi3-py39
    cannot export a buffer) a ctypes array at the map's address that keeps `columns`
    alive — every memoryview and numpy array made from it keeps the array, so the map is
    unmapped only when the last of them is gone."""
    if not isinstance(columns, _weir._Columns):
        return memoryview(columns)
    if ctypes is None:
        return memoryview(columns.tobytes())
    cap = columns.capacity
    t = _VIEW_TYPES.get(cap)
    if t is None:
        t = type("_Mapped", (ctypes.c_char * cap,), {"__slots__": ("columns",)})
        _VIEW_TYPES[cap] = t
    a = t.from_address(columns.address)
    a.columns = columns
    return memoryview(a).cast("B")[: len(columns)]


class ReplayDecision(NamedTuple):
    """One replayed event's decision: ``(allowed, remaining, retry_after, delay)``.

    A tuple (so it unpacks and compares like one) whose truth value is ``allowed``, as a
    :class:`Decision`'s is: ``[bool(d) for d in result]`` lists the admissions.
    """

    allowed: bool
    remaining: int
    retry_after: float
    delay: float

    def __bool__(self) -> bool:
        return bool(self.allowed)


class ReplayResult:
    """The decisions of a replayed trace, one column per field, in event order.

    Each column is a read-only ``memoryview`` (zero-copy into ``numpy.asarray``):

    - ``allowed``: format ``'?'`` (numpy ``bool``) — admitted, possibly after ``delay``;
    - ``remaining``: format ``'Q'`` (``uint64``) — whole cost-1 admissions left after;
    - ``retry_after``: format ``'d'`` (``float64``) — seconds until that cost fits, 0.0 when allowed;
    - ``delay``: format ``'d'`` — a leaky bucket's hold time, 0.0 otherwise.

    ``admitted`` is the number of allowed events, ``delayed`` the number of those with a
    delay; ``len(result)`` the number of events. ``result[i]`` is a :class:`ReplayDecision`
    (truth value ``allowed``), iteration yields them in order, and ``result[a:b:c]`` is a
    ``ReplayResult`` of those events (views of the same buffers, no copy).
    """

    __slots__ = ("allowed", "remaining", "admitted", "delayed", "_columns", "_wait", "_split")

    def __init__(self, columns: Any, admitted: int, delayed: int):
        # One buffer from the native loop (a bytes, or a memory map backed by huge pages
        # for a large result: see `_view`):
        # remaining | wait (8·n bytes each) | allowed (n bytes). `wait` is retry_after for
        # rejected events and delay for admitted ones; the two columns are separated only
        # if asked for and needed.
        n = len(columns) // 17
        m = _view(columns).toreadonly()
        self.remaining = m[: 8 * n].cast("Q")
        self._wait = m[8 * n : 16 * n].cast("d")
        self.allowed = m[16 * n :].cast("?")
        self.admitted = admitted
        self.delayed = delayed
        self._columns = columns
        self._split = None

    def _columns_split(self) -> tuple:
        if self._split is None:
            n = len(self.allowed)
            if self.delayed == 0:
                # Every non-zero wait is a retry_after: no copy; delay is all zeros
                # (bytes(n) is calloc'd: its pages are not touched until read).
                self._split = (self._wait, memoryview(bytes(8 * n)).cast("d"))
            else:
                ra, dl = _weir._split_wait(self._columns)
                self._split = (memoryview(ra).cast("d"), memoryview(dl).cast("d"))
        return self._split

    @property
    def retry_after(self) -> memoryview:
        """Seconds until each rejected event's cost would fit; 0.0 for admitted events."""
        return self._columns_split()[0]

    @property
    def delay(self) -> memoryview:
        """Seconds each admitted event is held (leaky bucket); 0.0 otherwise."""
        return self._columns_split()[1]

    def __len__(self) -> int:
        return len(self.allowed)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return self._slice(i)
        ok = self.allowed[i]
        w = self._wait[i]
        return ReplayDecision(ok, self.remaining[i], 0.0 if ok else w, w if ok else 0.0)

    def __iter__(self) -> Iterator[ReplayDecision]:
        for ok, rem, w in zip(self.allowed, self.remaining, self._wait):
            yield ReplayDecision(ok, rem, 0.0 if ok else w, w if ok else 0.0)

    def _slice(self, s: slice) -> "ReplayResult":
        """The events of `s` as a result of their own: views of this result's columns (the
        wait split, when some event was delayed, is made once here and sliced)."""
        r = ReplayResult.__new__(ReplayResult)
        r._columns = self._columns
        r.remaining = self.remaining[s]
        r._wait = self._wait[s]
        r.allowed = self.allowed[s]
        # `bytes.count` runs in C: the tallies of a large slice stay cheap.
        r.admitted = r.allowed.tobytes().count(1)
        if self.delayed == 0:
            r.delayed = 0
            r._split = None
        else:
            ra, dl = self._columns_split()
            r._split = (ra[s], dl[s])
            r.delayed = sum(1 for d in r._split[1] if d != 0.0)
        return r

    @property
    def rejected(self) -> int:
        """The number of rejected events."""
        return len(self.allowed) - self.admitted

    def to_numpy(self) -> dict:
        """The columns as numpy arrays (zero-copy, read-only); needs numpy."""
        import numpy as np

        return {
            "allowed": np.asarray(self.allowed),
            "remaining": np.asarray(self.remaining),
            "retry_after": np.asarray(self.retry_after),
            "delay": np.asarray(self.delay),
        }

    def __repr__(self) -> str:
        return f"ReplayResult(events={len(self)}, admitted={self.admitted}, rejected={self.rejected})"


def replay(limiter: Any, times: Any, costs: Any = None) -> ReplayResult:
    """Runs a whole arrival trace through ``limiter`` on its ``ManualClock``.

    For each event ``i`` the core decides ``costs[i]`` at ``times[i]`` (seconds; rounded to
    the nearest nanosecond) — the same step as ``limiter.try_acquire(costs[i])`` with the
    clock set to ``times[i]``. Times need not be sorted: a time earlier than the
    previous one is a clock rewind, which the core never turns into extra capacity. After
    the call the clock reads the last event's time. Inputs are validated before anything runs:
    NaN/negative times, costs of a different length, and a cost above the limiter's capacity
    (``InsufficientCapacity``, with ``.index``) leave the limiter untouched.

    ``times``: any sequence of numbers or any 1-D buffer (``array('d')``, a numpy array —
    float64 is read without conversion). ``costs``: ``None`` (all 1) or a sequence / 1-D
    buffer of non-negative ints. The GIL is released for traces of 4096 events or more (a
    chunk of 32768 events at a time): the trace must not change during the call. The
    columns of a large result (4 MiB or more) live in a read-only anonymous memory map
    advised for transparent huge pages on Linux (far fewer page faults), else in a
    ``bytes``; either way they are read-only views, and the memory lives as long as any
    view of it.
    """
    tc = _times_column(times)
    cc = None if costs is None else _costs_column(costs)
    return ReplayResult(*_weir._replay(limiter, tc, cc))
