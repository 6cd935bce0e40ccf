//! A deterministic single-threaded executor on a manual clock: virtual time.
//!
//! Every simulated request is a task (the same `Flow` steps a gateway runs). Tasks sleep
//! through [`SimTimer`], the engine's own [`Timer`] seam (leaky-bucket delays, the
//! concurrency queue's timeout, retry backoff, simulated upstream latency), and wait for
//! one another through the engine's own primitives (a released concurrency permit wakes a
//! queued task through its `event-listener` waker). The executor polls every ready task;
//! when none is ready it moves the clock straight to the next event — the earliest timer
//! or the next arrival — so an hour of traffic takes as long as its decisions, and the
//! order of events depends on nothing but the inputs (timers due at the same instant fire
//! in the order they were set; timers fire before arrivals of the same instant).
//!
//! Hand-written rather than a runtime crate's test clock (tokio's paused time): those
//! advance only when every task is idle *and* schedule by their own rules, which is what
//! a simulation must control to be byte-for-byte reproducible; this is ~150 lines.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use std::cell::RefCell;
use std::collections::{BinaryHeap, VecDeque};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::Wake;
use std::time::Duration;
use weir_core::{Clock, ManualClock, Nanos};
use weir_policy::Timer;

/// A timer entry: wake `waker` at `at`; `seq` keeps equal instants in setting order.
struct Entry {
    at: u64,
    seq: u64,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    // Reversed: `BinaryHeap` is a max-heap, the earliest entry must come out first.
    fn cmp(&self, o: &Self) -> core::cmp::Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

#[derive(Default)]
struct Timers {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

/// The [`Timer`] of a simulation: sleeping registers a wake-up at a virtual instant.
#[derive(Clone)]
pub(crate) struct SimTimer {
    clock: Arc<ManualClock>,
    timers: Rc<RefCell<Timers>>,
}

impl SimTimer {
    pub(crate) fn now(&self) -> Nanos {
        self.clock.now()
    }
}

impl Timer for SimTimer {
    fn sleep(&self, d: Duration) -> impl Future<Output = ()> {
        Sleep {
            at: self.clock.now().saturating_add(Nanos::from(d)).0,
            registered: false,
            timer: self,
        }
    }
}

struct Sleep<'a> {
    at: u64,
    registered: bool,
    timer: &'a SimTimer,
}

impl Future for Sleep<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.timer.clock.now().0 >= self.at {
            return Poll::Ready(());
        }
        if !self.registered {
            self.registered = true;
            let mut t = self.timer.timers.borrow_mut();
            let seq = t.seq;
            t.seq += 1;
            t.heap.push(Entry {
                at: self.at,
                seq,
                waker: cx.waker().clone(),
            });
        }
        Poll::Pending
    }
}

/// Wakes task `id` by queueing it (a waker must be `Send + Sync`, hence the mutex; it is
/// never contended: one thread).
struct TaskWaker {
    id: usize,
    ready: Arc<Mutex<VecDeque<usize>>>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.ready
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(self.id);
    }
}

/// A live task's slot: its future in place (the allocation is kept for the next task of
/// the slot), its arrival index, and its waker (which names the slot, so it is kept too).
struct Slot<F> {
    fut: Pin<Box<Option<F>>>,
    arrival: usize,
    waker: Waker,
}

/// Runs one task per arrival, in virtual time.
pub(crate) struct Executor {
    timer: SimTimer,
    ready: Arc<Mutex<VecDeque<usize>>>,
}

impl Executor {
    pub(crate) fn new(clock: Arc<ManualClock>) -> Executor {
        Executor {
            timer: SimTimer {
                clock,
                timers: Rc::default(),
            },
            ready: Arc::default(),
        }
    }

    pub(crate) fn timer(&self) -> &SimTimer {
        &self.timer
    }

    /// For each of `n` arrivals `i` (`arrival(i)`: non-decreasing nanoseconds) starts
    /// `task(i)` at that instant; runs until every task has finished, handing each
    /// output to `done(i, output)`. Returns the arrivals whose task never finished
    /// (parked on something nothing will ever signal — the engine's waits are all bounded
    /// by a timer, so none is expected), for which `done` was not called.
    ///
    /// A task lives in a slot; a finished task's slot (its future's memory and its
    /// waker) is taken by the next arrival, so a run allocates per concurrent task, not
    /// per request.
    pub(crate) fn run<T, F, G>(
        &self,
        n: usize,
        arrival: impl Fn(usize) -> Nanos,
        mut task: G,
        mut done: impl FnMut(usize, T),
    ) -> Vec<usize>
    where
        F: Future<Output = T>,
        G: FnMut(usize) -> F,
    {
        let arrival_ns = |k: usize| (k < n).then(|| arrival(k).0);
        let mut slots: Vec<Slot<F>> = Vec::new();
        let mut free: Vec<usize> = Vec::new();
        let mut next = 0;
        let mut batch = VecDeque::new();
        loop {
            self.drain(&mut slots, &mut free, &mut batch, &mut done);
            let timer_at = self.timer.timers.borrow().heap.peek().map(|e| e.at);
            let arrival_at = arrival_ns(next);
            // Timers due at an instant fire before that instant's arrivals.
            let (at, timers_first) = match (timer_at, arrival_at) {
                (None, None) => {
                    return slots
                        .iter()
                        .filter(|s| s.fut.is_some())
                        .map(|s| s.arrival)
                        .collect();
                }
                (Some(t), Some(a)) => (t.min(a), t <= a),
                (Some(t), None) => (t, true),
                (None, Some(a)) => (a, false),
            };
            self.advance_to(at);
            if timers_first {
                let mut timers = self.timer.timers.borrow_mut();
                while timers.heap.peek().is_some_and(|e| e.at <= at) {
                    if let Some(e) = timers.heap.pop() {
                        e.waker.wake();
                    }
                }
                continue;
            }
            // Every arrival of this instant, in trace order (queued under one lock).
            let mut ready = self.ready.lock().unwrap_or_else(|p| p.into_inner());
            while arrival_ns(next) == Some(at) {
                let id = match free.pop() {
                    Some(id) => {
                        let slot = &mut slots[id];
                        slot.fut.set(Some(task(next)));
                        slot.arrival = next;
                        id
                    }
                    None => {
                        let id = slots.len();
                        let waker = Waker::from(Arc::new(TaskWaker {
                            id,
                            ready: self.ready.clone(),
                        }));
                        slots.push(Slot {
                            fut: Box::pin(Some(task(next))),
                            arrival: next,
                            waker,
                        });
                        id
                    }
                };
                ready.push_back(id);
                next += 1;
            }
        }
    }

    fn advance_to(&self, t: u64) {
        if t > self.timer.clock.now().0 {
            self.timer.clock.set(Nanos(t));
        }
    }

    /// Polls ready tasks until none is. The queue is taken whole under one lock (into
    /// `batch`, an empty queue kept for its memory) and polled in order; tasks woken
    /// meanwhile are queued behind it, the same order as popping one at a time.
    fn drain<T, F: Future<Output = T>>(
        &self,
        slots: &mut [Slot<F>],
        free: &mut Vec<usize>,
        batch: &mut VecDeque<usize>,
        done: &mut impl FnMut(usize, T),
    ) {
        loop {
            core::mem::swap(
                &mut *self.ready.lock().unwrap_or_else(|p| p.into_inner()),
                batch,
            );
            if batch.is_empty() {
                return;
            }
            while let Some(id) = batch.pop_front() {
                // A task woken after it finished (a stale timer) is skipped; one woken by
                // a stale timer of its slot's earlier task is polled once more than
                // needed, which a future allows (and so it was before slots were reused).
                let slot = &mut slots[id];
                let Some(fut) = slot.fut.as_mut().as_pin_mut() else {
                    continue;
                };
                let mut cx = Context::from_waker(&slot.waker);
                if let Poll::Ready(v) = fut.poll(&mut cx) {
                    done(slot.arrival, v);
                    slot.fut.set(None);
                    free.push(id);
                }
            }
        }
    }
}
