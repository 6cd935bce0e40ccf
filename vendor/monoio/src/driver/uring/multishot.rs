//! Multishot receive on a provided buffer ring (weir's patch to monoio 0.2.4).
//!
//! A one-shot `IORING_OP_RECV` submitted when no data is there yet makes the kernel try the
//! receive, fail, arm a poll on the socket, and finish the receive later from task work; a
//! request/response connection does that for most requests it reads. A multishot receive
//! (kernel 6.0+) stays armed: every time data arrives the kernel receives it into a buffer
//! taken from a ring this driver registered (`IORING_REGISTER_PBUF_RING`, 5.19+) and posts a
//! completion flagged `IORING_CQE_F_MORE`, with no submission and no poll arm per read.
//!
//! Ownership: the driver owns the ring and its buffers. A completion's bytes are queued on
//! the socket's slot until the reader copies them out ([`Multishot::poll_recv`]), and the
//! buffer goes back to the ring as soon as it is empty. So that one slow reader cannot take
//! the whole ring, a slot holding [`MAX_QUEUED`] buffers cancels its receive; it is armed
//! again once the reader has emptied the queue. When the ring runs dry the kernel ends the
//! receive with `ENOBUFS` (at once, data or not: it picks the buffer first). The reader then
//! takes its bytes with a plain non-blocking `recv(2)`, and while more than half the ring is
//! held by unread queues it waits with a one-shot `IORING_OP_POLL_ADD` instead of arming a
//! receive that would fail again at once. A slot whose reader is dropped while a request of
//! its is in flight cancels it and stays until the final completion (for a receive, the one
//! without `IORING_CQE_F_MORE`), so a completion never finds its slot reused.

use std::{
    alloc::{alloc, dealloc, Layout},
    collections::VecDeque,
    io,
    os::unix::io::RawFd,
    sync::atomic::{AtomicU16, Ordering},
    task::{Context, Poll, Waker},
};

use io_uring::{cqueue, opcode, squeue, types};

/// Tag of a multishot receive's `user_data` (slot index in the low bits). Ordinary
/// operations use slab indices, far below; the driver's reserved values are far above.
pub(crate) const MULTI_TAG: u64 = 1 << 62;
/// With [`MULTI_TAG`]: the slot's one-shot poll, not its receive.
const POLL_TAG: u64 = 1 << 61;
/// Buffer group id of the ring.
pub(crate) const BGID: u16 = 0x7765;
/// Buffers in the ring (a power of two).
const ENTRIES: u16 = 512;
/// Size of each buffer.
const BUF_SIZE: usize = 4096;
/// Buffers one socket may hold unread before its receive is cancelled.
pub(crate) const MAX_QUEUED: usize = 8;
const PAGE: usize = 4096;

/// The registered ring: `ENTRIES` descriptors and `ENTRIES * BUF_SIZE` bytes of buffers.
struct BufRing {
    ring: *mut types::BufRingEntry,
    bufs: *mut u8,
    /// Our copy of the ring's tail (the kernel reads the shared one).
    tail: u16,
    /// Buffers the kernel filled and the slots' queues still hold.
    held: usize,
}

impl BufRing {
    fn ring_layout() -> Layout {
        Layout::from_size_align(ENTRIES as usize * std::mem::size_of::<types::BufRingEntry>(), PAGE)
            .expect("valid layout")
    }

    fn bufs_layout() -> Layout {
        Layout::from_size_align(ENTRIES as usize * BUF_SIZE, PAGE).expect("valid layout")
    }

    /// Allocates the ring, registers it and provides every buffer.
    fn new(submitter: &io_uring::Submitter<'_>) -> io::Result<BufRing> {
        // SAFETY: both layouts have a non-zero size; the ring is zeroed before the kernel
        // sees it (its tail starts at 0), the buffers are only read after the kernel wrote
        // the bytes a completion reports.
        let ring: *mut types::BufRingEntry =
            unsafe { std::alloc::alloc_zeroed(Self::ring_layout()) }.cast();
        let bufs = unsafe { alloc(Self::bufs_layout()) };
        if ring.is_null() || bufs.is_null() {
            unsafe { Self::free(ring, bufs) };
            return Err(io::ErrorKind::OutOfMemory.into());
        }
        // SAFETY: `ring` is page aligned, holds `ENTRIES` entries and lives until the driver
        // drops it after unregistering (or leaks it, see `UringInner::drop`).
        if let Err(e) = unsafe { submitter.register_buf_ring(ring as u64, ENTRIES, BGID) } {
            unsafe { Self::free(ring, bufs) };
            return Err(e);
        }
        let mut this = BufRing {
            ring,
            bufs,
            tail: 0,
            held: 0,
        };
        for bid in 0..ENTRIES {
            this.provide(bid);
        }
        this.held = 0;
        Ok(this)
    }

    unsafe fn free(ring: *mut types::BufRingEntry, bufs: *mut u8) {
        if !ring.is_null() {
            dealloc(ring.cast(), Self::ring_layout());
        }
        if !bufs.is_null() {
            dealloc(bufs, Self::bufs_layout());
        }
    }

    /// Gives buffer `bid` (back) to the kernel.
    fn provide(&mut self, bid: u16) {
        self.held = self.held.wrapping_sub(1);
        let index = (self.tail & (ENTRIES - 1)) as usize;
        // SAFETY: `index < ENTRIES`; the entry at the tail is not the kernel's until the tail
        // moves past it, which the release store below publishes.
        unsafe {
            let entry = &mut *self.ring.add(index);
            entry.set_addr(self.bufs.add(bid as usize * BUF_SIZE) as u64);
            entry.set_len(BUF_SIZE as u32);
            entry.set_bid(bid);
            self.tail = self.tail.wrapping_add(1);
            let tail = types::BufRingEntry::tail(self.ring) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }

    /// The first `len` bytes of buffer `bid`, as the kernel wrote them.
    fn bytes(&self, bid: u16, off: usize, len: usize) -> &[u8] {
        debug_assert!(off + len <= BUF_SIZE && bid < ENTRIES);
        // SAFETY: in bounds; a completion reported these bytes written and the buffer is not
        // the kernel's again until `provide`.
        unsafe { std::slice::from_raw_parts(self.bufs.add(bid as usize * BUF_SIZE + off), len) }
    }
}

/// One socket's receive.
struct Slot {
    fd: RawFd,
    /// Received and unread: (buffer id, length, bytes already read).
    queue: VecDeque<(u16, usize, usize)>,
    /// A multishot receive is in flight (until its completion without `F_MORE`).
    armed: bool,
    /// A cancel for it has been pushed.
    cancelling: bool,
    /// The peer closed its side (a zero-length receive).
    eof: bool,
    /// The ring ran dry: read with `recv(2)` (see the module docs).
    no_bufs: bool,
    /// A one-shot poll is in flight.
    polling: bool,
    err: Option<io::Error>,
    waker: Option<Waker>,
    /// The reader is gone; free the slot at the final completion.
    orphan: bool,
}

/// The driver's multishot receives and their buffer ring.
pub(crate) struct Multishot {
    ring: Option<BufRing>,
    /// Set up failed (or the kernel is older than 6.0): never try again.
    unsupported: bool,
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    /// Cancels decided while the completion queue was borrowed.
    cancels: Vec<u64>,
}

impl Multishot {
    pub(crate) const fn new() -> Self {
        Multishot {
            ring: None,
            unsupported: false,
            slots: Vec::new(),
            free: Vec::new(),
            cancels: Vec::new(),
        }
    }

    /// A slot for `fd`, or `None` when multishot receive is not available here.
    pub(crate) fn register(&mut self, submitter: &io_uring::Submitter<'_>, fd: RawFd) -> Option<usize> {
        if self.ring.is_none() {
            if self.unsupported || !kernel_at_least(6, 0) {
                self.unsupported = true;
                return None;
            }
            match BufRing::new(submitter) {
                Ok(r) => self.ring = Some(r),
                Err(_) => {
                    self.unsupported = true;
                    return None;
                }
            }
        }
        let slot = Slot {
            fd,
            queue: VecDeque::new(),
            armed: false,
            cancelling: false,
            eof: false,
            no_bufs: false,
            polling: false,
            err: None,
            waker: None,
            orphan: false,
        };
        Some(match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(slot);
                i
            }
            None => {
                self.slots.push(Some(slot));
                self.slots.len() - 1
            }
        })
    }

    /// Copies received bytes into `dst`'s spare capacity (which must not be empty).
    /// `Ready(Ok(0))` is end of stream. `Pending` with `push` called for an SQE to submit
    /// when the receive must be armed.
    pub(crate) fn poll_recv(
        &mut self,
        index: usize,
        cx: &mut Context<'_>,
        dst: &mut Vec<u8>,
        push: impl FnOnce(squeue::Entry),
    ) -> Poll<io::Result<usize>> {
        let ring = self.ring.as_mut().expect("a slot exists only with a ring");
        let slot = self.slots[index].as_mut().expect("live slot");
        if !slot.queue.is_empty() {
            let mut n = 0;
            while let Some(&mut (bid, len, ref mut off)) = slot.queue.front_mut() {
                let room = dst.capacity() - dst.len();
                if room == 0 {
                    break;
                }
                let take = room.min(len - *off);
                dst.extend_from_slice(ring.bytes(bid, *off, take));
                *off += take;
                n += take;
                if *off == len {
                    slot.queue.pop_front();
                    ring.provide(bid);
                }
            }
            return Poll::Ready(Ok(n));
        }
        if let Some(e) = slot.err.take() {
            return Poll::Ready(Err(e));
        }
        if slot.eof {
            return Poll::Ready(Ok(0));
        }
        if slot.no_bufs {
            let spare = dst.spare_capacity_mut();
            // SAFETY: `recv` writes at most `spare.len()` bytes into `dst`'s spare capacity.
            let got = unsafe {
                libc::recv(slot.fd, spare.as_mut_ptr().cast(), spare.len(), libc::MSG_DONTWAIT)
            };
            if got >= 0 {
                // SAFETY: the kernel initialised `got` bytes.
                unsafe { dst.set_len(dst.len() + got as usize) };
                if got == 0 {
                    slot.eof = true;
                }
                return Poll::Ready(Ok(got as usize));
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::WouldBlock {
                return Poll::Ready(Err(e));
            }
            if ring.held > ENTRIES as usize / 2 {
                set_waker(&mut slot.waker, cx);
                if !slot.polling {
                    slot.polling = true;
                    push(
                        opcode::PollAdd::new(types::Fd(slot.fd), libc::POLLIN as u32)
                            .build()
                            .user_data(MULTI_TAG | POLL_TAG | index as u64),
                    );
                }
                return Poll::Pending;
            }
            slot.no_bufs = false;
        }
        set_waker(&mut slot.waker, cx);
        if !slot.armed && !slot.cancelling {
            slot.armed = true;
            push(
                opcode::RecvMulti::new(types::Fd(slot.fd), BGID)
                    .build()
                    .user_data(MULTI_TAG | index as u64),
            );
        }
        Poll::Pending
    }

    /// The reader of `index` is gone.
    pub(crate) fn deregister(&mut self, index: usize, mut push: impl FnMut(squeue::Entry)) {
        let ring = self.ring.as_mut().expect("a slot exists only with a ring");
        let slot = self.slots[index].as_mut().expect("live slot");
        for (bid, ..) in slot.queue.drain(..) {
            ring.provide(bid);
        }
        slot.waker = None;
        if slot.armed || slot.polling {
            slot.orphan = true;
            if slot.armed && !slot.cancelling {
                slot.cancelling = true;
                push(cancel(MULTI_TAG | index as u64));
            }
            if slot.polling {
                push(cancel(MULTI_TAG | POLL_TAG | index as u64));
            }
        } else {
            self.slots[index] = None;
            self.free.push(index);
        }
    }

    /// A completion for slot `tag & !(MULTI_TAG | POLL_TAG)`: its receive or its poll.
    pub(crate) fn complete(&mut self, tag: u64, cqe: &cqueue::Entry) {
        let index = (tag & !(MULTI_TAG | POLL_TAG)) as usize;
        let (res, flags) = (cqe.result(), cqe.flags());
        let ring = self.ring.as_mut().expect("a slot exists only with a ring");
        let slot = self.slots[index].as_mut().expect("completion for a live slot");
        if tag & POLL_TAG != 0 {
            slot.polling = false;
            if slot.orphan {
                if !slot.armed {
                    self.slots[index] = None;
                    self.free.push(index);
                }
            } else if let Some(w) = slot.waker.take() {
                w.wake();
            }
            return;
        }
        let buf = cqueue::buffer_select(flags);
        match (res, buf) {
            (n, Some(bid)) if n > 0 => {
                ring.held += 1;
                if slot.orphan {
                    ring.provide(bid);
                } else {
                    slot.queue.push_back((bid, n as usize, 0));
                }
            }
            (n, bid) => {
                if let Some(bid) = bid {
                    ring.held += 1;
                    ring.provide(bid);
                }
                match -n {
                    0 => slot.eof = true,
                    libc::ENOBUFS => slot.no_bufs = true,
                    libc::ECANCELED => {}
                    e => slot.err = Some(io::Error::from_raw_os_error(e)),
                }
            }
        }
        if !cqueue::more(flags) {
            slot.armed = false;
            slot.cancelling = false;
        }
        if slot.orphan {
            if !slot.armed && !slot.polling {
                self.slots[index] = None;
                self.free.push(index);
            }
            return;
        }
        if slot.armed && !slot.cancelling && slot.queue.len() >= MAX_QUEUED {
            slot.cancelling = true;
            self.cancels.push(MULTI_TAG | index as u64);
        }
        if let Some(w) = slot.waker.take() {
            w.wake();
        }
    }

    /// Cancels decided during the last completions, to push now.
    pub(crate) fn take_cancels(&mut self) -> impl Iterator<Item = squeue::Entry> + '_ {
        self.cancels.drain(..).map(cancel)
    }

    /// Whether the ring exists (the driver must then settle it on drop).
    pub(crate) fn has_ring(&self) -> bool {
        self.ring.is_some()
    }

    /// Frees the ring. Only when the kernel can no longer write into it.
    pub(crate) fn free_ring(&mut self) {
        if let Some(r) = self.ring.take() {
            unsafe { BufRing::free(r.ring, r.bufs) };
        }
    }

    /// Forgets the ring without freeing it (the kernel may still use it).
    pub(crate) fn leak_ring(&mut self) {
        self.ring = None;
    }
}

fn set_waker(waker: &mut Option<Waker>, cx: &Context<'_>) {
    match waker {
        Some(w) if w.will_wake(cx.waker()) => {}
        _ => *waker = Some(cx.waker().clone()),
    }
}

/// A cancel of the request with `user_data`.
fn cancel(user_data: u64) -> squeue::Entry {
    opcode::AsyncCancel::new(user_data)
        .build()
        .user_data(super::CANCEL_USERDATA)
}

/// Whether the running kernel's release is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    // SAFETY: `uname` fills the zeroed struct; `release` is NUL terminated.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return false;
    }
    let release = unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) };
    let mut parts = release
        .to_str()
        .unwrap_or("")
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (a, b) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (a, b) >= (major, minor)
}

/// A socket's multishot receive (io_uring driver only; see the module docs): reads copy
/// from the driver's buffer ring into the caller's buffer, and no read submits anything
/// while the receive stays armed. Holds the socket's descriptor open while it lives; drop
/// it to cancel the receive.
pub struct RecvMulti {
    driver: std::rc::Rc<std::cell::UnsafeCell<super::UringInner>>,
    index: usize,
    // Declared last: dropped after the cancel is pushed, so the close follows it.
    _fd: crate::driver::shared_fd::SharedFd,
}

impl RecvMulti {
    /// A multishot receive on `fd`, or `None` when the current driver is not io_uring,
    /// the kernel is older than 6.0 or refuses the buffer ring.
    pub(crate) fn new(fd: &crate::driver::shared_fd::SharedFd) -> Option<RecvMulti> {
        if !crate::driver::CURRENT.is_set() {
            return None;
        }
        crate::driver::CURRENT.with(|inner| match inner {
            crate::driver::Inner::Uring(driver) => {
                // SAFETY: the driver is only touched from this thread, and not re-entered.
                let this = unsafe { &mut *driver.get() };
                let index = this.multi_register(fd.raw_fd())?;
                Some(RecvMulti {
                    driver: driver.clone(),
                    index,
                    _fd: fd.clone(),
                })
            }
            #[allow(unreachable_patterns)]
            _ => None,
        })
    }

    /// Reads into `dst`'s spare capacity, which must not be empty; `Ok(0)` is end of stream.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>, dst: &mut Vec<u8>) -> Poll<io::Result<usize>> {
        debug_assert!(dst.capacity() > dst.len(), "poll_recv needs spare capacity");
        // SAFETY: as in `new`.
        let this = unsafe { &mut *self.driver.get() };
        let mut arm = None;
        let res = this
            .multi
            .poll_recv(self.index, cx, dst, |sqe| arm = Some(sqe));
        if let Some(sqe) = arm {
            this.push_sqe(&sqe);
        }
        res
    }

    /// [`poll_recv`](Self::poll_recv) as a future.
    pub async fn recv(&mut self, dst: &mut Vec<u8>) -> io::Result<usize> {
        std::future::poll_fn(|cx| self.poll_recv(cx, dst)).await
    }
}

impl Drop for RecvMulti {
    fn drop(&mut self) {
        // SAFETY: as in `new`.
        let this = unsafe { &mut *self.driver.get() };
        let mut cancels: [Option<squeue::Entry>; 2] = [None, None];
        this.multi.deregister(self.index, |sqe| {
            let free = cancels.iter_mut().find(|c| c.is_none());
            *free.expect("at most two cancels") = Some(sqe);
        });
        for sqe in cancels.iter().flatten() {
            this.push_sqe(sqe);
        }
    }
}
