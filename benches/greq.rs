//! Criterion benchmark of generalized requests: start + complete + wait on one thread, and the
//! same through `wait_all` over a batch. `viaduct bench greq` gives the figure compared with
//! MPICH; this one tracks regressions.
// criterion's group and main macros generate functions without doc comments.
#![allow(missing_docs)]

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use viaduct::agent::request::{Request, wait_all};

fn start_complete_wait(c: &mut Criterion) {
    c.bench_function("greq start+complete+wait", |b| {
        b.iter(|| {
            let (mut request, handle) = Request::generalized(());
            handle.complete().expect("first completion");
            black_box(request.wait().expect("no callback fails"));
        })
    });
}

fn wait_all_batch(c: &mut Criterion) {
    c.bench_function("greq wait_all of 64 complete requests", |b| {
        b.iter_batched(
            || {
                (0..64)
                    .map(|_| {
                        let (r, h) = Request::generalized(());
                        h.complete().expect("first completion");
                        r
                    })
                    .collect::<Vec<_>>()
            },
            |mut requests| wait_all(&mut requests, None).expect("no callback fails"),
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, start_complete_wait, wait_all_batch);
criterion_main!(benches);
