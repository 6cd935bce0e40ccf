//! The frontend's timer, and a two-way select that needs no runtime.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::time::Duration;

/// Sleeping, supplied by the frontend's runtime (monoio, tokio) or by tests (a timer that
/// advances a manual clock). The engine uses it for leaky-bucket delays, the concurrency
/// queue's timeout and the global store's timeout.
pub trait Timer {
    /// Completes after `d`.
    fn sleep(&self, d: Duration) -> impl Future<Output = ()>;
}

pub(crate) enum Either<A, B> {
    Left(A),
    Right(B),
}

/// Polls `a` then `b`; the first ready wins (`a` on a tie).
pub(crate) fn select<A: Future + Unpin, B: Future + Unpin>(
    a: A,
    b: B,
) -> impl Future<Output = Either<A::Output, B::Output>> {
    Select { a, b }
}

struct Select<A, B> {
    a: A,
    b: B,
}

impl<A: Future + Unpin, B: Future + Unpin> Future for Select<A, B> {
    type Output = Either<A::Output, B::Output>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(v) = Pin::new(&mut self.a).poll(cx) {
            return Poll::Ready(Either::Left(v));
        }
        if let Poll::Ready(v) = Pin::new(&mut self.b).poll(cx) {
            return Poll::Ready(Either::Right(v));
        }
        Poll::Pending
    }
}
