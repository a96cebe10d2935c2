//! Random sequences of operations on generalized requests, checked against the contract: query
//! only after complete, free exactly once and only once both complete and the user's handle are
//! done (and after query when a wait or test ran both), never a second completion.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use proptest::prelude::*;
use viaduct_request::{
    BoxError, GrequestOps, QueryStatus, Request, RequestError, test_all, test_any,
};

#[derive(Default)]
struct Seen {
    complete: AtomicBool,
    queries: AtomicUsize,
    frees: AtomicUsize,
    query_after_free: AtomicBool,
    query_before_complete: AtomicBool,
}

struct Model(Arc<Seen>);

impl GrequestOps for Model {
    fn query(&self, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        if !self.0.complete.load(Ordering::SeqCst) {
            self.0.query_before_complete.store(true, Ordering::SeqCst);
        }
        if self.0.frees.load(Ordering::SeqCst) > 0 {
            self.0.query_after_free.store(true, Ordering::SeqCst);
        }
        self.0.queries.fetch_add(1, Ordering::SeqCst);
        status.set_count(1);
        Ok(())
    }
    fn free(&self) -> Result<(), BoxError> {
        self.0.frees.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Complete,
    Test,
    TestAny,
    TestAll,
    GetStatus,
    Cancel,
    Free,
    Wait,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::Complete),
        Just(Op::Test),
        Just(Op::TestAny),
        Just(Op::TestAll),
        Just(Op::GetStatus),
        Just(Op::Cancel),
        Just(Op::Free),
        Just(Op::Wait),
    ]
}

/// The default configuration; under Miri a few cases and no failure file (Miri keeps the
/// program off the file system, and interprets each case slowly).
fn model_config() -> ProptestConfig {
    if cfg!(miri) {
        ProptestConfig {
            cases: 4,
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    } else {
        ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(model_config())]

    #[test]
    fn callbacks_follow_the_contract(ops in proptest::collection::vec(op(), 1..12)) {
        let seen = Arc::new(Seen::default());
        let (req, handle) = Request::generalized(Model(Arc::clone(&seen)));
        let mut slot = vec![req];
        let mut completed = false;
        let mut handle_done = false;
        for op in ops {
            match op {
                Op::Complete => {
                    let was = completed;
                    seen.complete.store(true, Ordering::SeqCst);
                    let r = handle.complete();
                    if was {
                        prop_assert!(matches!(r, Err(RequestError::AlreadyComplete)));
                    } else {
                        prop_assert!(r.is_ok());
                    }
                    completed = true;
                }
                Op::Test if !handle_done => {
                    let r = slot[0].test().unwrap();
                    prop_assert_eq!(r.is_some(), completed);
                    handle_done |= completed;
                }
                Op::TestAny if !handle_done => {
                    let r = test_any(&mut slot);
                    prop_assert_eq!(r.is_pending(), !completed);
                    prop_assert_eq!(r.completed().is_some(), completed);
                    handle_done |= completed;
                }
                Op::TestAll if !handle_done => {
                    prop_assert_eq!(test_all(&mut slot, None).unwrap(), completed);
                    handle_done |= completed;
                }
                Op::GetStatus if !handle_done => {
                    let before = seen.frees.load(Ordering::SeqCst);
                    prop_assert_eq!(slot[0].get_status().unwrap().is_some(), completed);
                    prop_assert_eq!(seen.frees.load(Ordering::SeqCst), before);
                }
                Op::Cancel if !handle_done => slot[0].cancel().unwrap(),
                Op::Free if !handle_done => {
                    std::mem::take(&mut slot[0]).free().unwrap();
                    handle_done = true;
                }
                Op::Wait if !handle_done && completed => {
                    prop_assert_eq!(slot[0].wait().unwrap().count(), 1);
                    handle_done = true;
                }
                _ => {}
            }
            let frees = seen.frees.load(Ordering::SeqCst);
            prop_assert_eq!(frees, usize::from(completed && handle_done));
        }
        prop_assert!(!seen.query_before_complete.load(Ordering::SeqCst));
        prop_assert!(!seen.query_after_free.load(Ordering::SeqCst));
        // Finish: whatever is left, free runs exactly once in total.
        if !handle_done {
            std::mem::take(&mut slot[0]).free().unwrap();
        }
        if !completed {
            seen.complete.store(true, Ordering::SeqCst);
            handle.complete().unwrap();
        }
        prop_assert_eq!(seen.frees.load(Ordering::SeqCst), 1);
    }
}
