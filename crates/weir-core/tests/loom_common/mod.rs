//! Helpers shared by the loom models (`tests/loom_*.rs`).
//!
//! The central check is *linearizability against the single-owner form*: the decisions that
//! concurrent callers of a shared primitive received must be exactly the decisions of the
//! single-owner form applied to the same operations in *some* sequential order (every order
//! is allowed because all operations of a model overlap in time), and the final state must
//! match that order's final state.
#![allow(dead_code)]

/// Every permutation of `0..n` (n ≤ 5 in the models).
pub(crate) fn permutations(n: usize) -> Vec<Vec<usize>> {
    fn go(prefix: &mut Vec<usize>, rest: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if rest.is_empty() {
            out.push(prefix.clone());
            return;
        }
        for i in 0..rest.len() {
            let x = rest.remove(i);
            prefix.push(x);
            go(prefix, rest, out);
            prefix.pop();
            rest.insert(i, x);
        }
    }
    let mut out = Vec::new();
    go(&mut Vec::new(), &mut (0..n).collect(), &mut out);
    out
}

/// Finds a sequential order of `ops` in which `replay` (a fresh single-owner instance
/// applying the operations in that order) produces exactly the observed results and final
/// state. Panics with the observation when there is none.
pub(crate) fn assert_linearizable<
    Op: core::fmt::Debug,
    R: PartialEq + core::fmt::Debug,
    S: PartialEq + core::fmt::Debug,
>(
    ops: &[Op],
    observed: &[R],
    observed_final: &S,
    replay: impl Fn(&[usize]) -> (Vec<R>, S),
) {
    for order in permutations(ops.len()) {
        let (results, fin) = replay(&order);
        if results == observed && &fin == observed_final {
            return;
        }
    }
    panic!(
        "not linearizable: ops {ops:?} observed {observed:?} final {observed_final:?} \
         match no sequential order of the single-owner form"
    );
}
