//! Decoding ahead: a few threads that decode messages while the ingest thread is still
//! polling, accepting, or applying earlier feature-stream columns, so that parsing JSON (the
//! cost of JSON ingest, and about half of a feature column's) overlaps the rest of the loop
//! instead of adding to it. They live in a scope (the ingest loop's), so that their jobs borrow
//! the Kafka messages and read each payload where librdkafka holds it instead of a copy.
//!
//! Jobs go to the workers in turn and their results are taken back in the same turn, so they
//! come back in the order they were submitted (the order the messages were read). The ingest
//! thread takes exactly one result per job; a job whose worker is gone answers `None` and the
//! caller decodes the message itself, so a lost thread costs speed, never a message.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::{Scope, ScopedJoinHandle};

type Job<'scope, T> = Box<dyn FnOnce() -> T + Send + 'scope>;

struct Worker<'scope, T> {
    jobs: Option<Sender<Job<'scope, T>>>,
    results: Receiver<T>,
    thread: Option<ScopedJoinHandle<'scope, ()>>,
}

/// Worker threads that run jobs in turn; results come back in submission order.
///
/// The threads live in a `std::thread::scope` (`Ingest::run`'s), so a job may borrow what
/// outlives the scope, such as the Kafka messages themselves (their payloads are read where
/// librdkafka put them, never copied). They start with the first job (`start`), so ingest
/// that never has one (binary messages only) starts none.
pub struct Ahead<'scope, 'env, T> {
    scope: &'scope Scope<'scope, 'env>,
    name: &'static str,
    threads: usize,
    started: bool,
    workers: Vec<Worker<'scope, T>>,
    submitted: usize,
    taken: usize,
}

impl<'scope, 'env, T: Send + 'scope> Ahead<'scope, 'env, T> {
    /// `threads` workers (at least one) named `name-k`, in `scope`, started by `start`.
    pub fn new(scope: &'scope Scope<'scope, 'env>, name: &'static str, threads: usize) -> Self {
        Ahead {
            scope,
            name,
            threads: threads.max(1),
            started: false,
            workers: Vec::new(),
            submitted: 0,
            taken: 0,
        }
    }

    /// Starts the workers if they were not (fewer if a thread cannot start); whether jobs
    /// can be submitted (some worker started).
    pub fn start(&mut self) -> bool {
        if !self.started {
            self.started = true;
            for k in 0..self.threads {
                let (job_tx, job_rx) = channel::<Job<'scope, T>>();
                let (result_tx, result_rx) = channel();
                let spawned = std::thread::Builder::new()
                    .name(format!("{}-{k}", self.name))
                    .spawn_scoped(self.scope, move || {
                        while let Ok(job) = job_rx.recv() {
                            // A job that panics ends its worker, as it would end a thread of
                            // its own (its results channel closes: `take` answers `None`);
                            // caught so that the scope does not raise it again in the thread
                            // that owns the scope.
                            let Ok(result) = catch_unwind(AssertUnwindSafe(job)) else {
                                break;
                            };
                            if result_tx.send(result).is_err() {
                                break;
                            }
                        }
                    });
                match spawned {
                    Ok(thread) => self.workers.push(Worker {
                        jobs: Some(job_tx),
                        results: result_rx,
                        thread: Some(thread),
                    }),
                    Err(e) => tracing::warn!(error = %e, "cannot start a decoding thread"),
                }
            }
        }
        !self.workers.is_empty()
    }

    /// Queues a job (after `start` answered `true`); its result is the one `take` returns
    /// after those of the jobs before it.
    pub fn submit(&mut self, job: impl FnOnce() -> T + Send + 'scope) {
        let k = self.submitted % self.workers.len().max(1);
        self.submitted += 1;
        if let Some(jobs) = self.workers.get(k).and_then(|w| w.jobs.as_ref()) {
            // A worker that is gone answers `None` in `take`.
            let _ = jobs.send(Box::new(job));
        }
    }

    /// The result of the oldest job not taken yet (waits for it); `None` if its worker is gone
    /// or no job is pending.
    pub fn take(&mut self) -> Option<T> {
        if self.taken == self.submitted {
            return None;
        }
        let k = self.taken % self.workers.len().max(1);
        self.taken += 1;
        self.workers.get(k)?.results.recv().ok()
    }
}

impl<T> Drop for Ahead<'_, '_, T> {
    /// Closing the job channels stops the workers; wait for them here (the scope would, at
    /// its end, and would wait forever on workers whose channels are still open).
    fn drop(&mut self) {
        for w in &mut self.workers {
            w.jobs = None;
        }
        for w in &mut self.workers {
            if let Some(t) = w.thread.take() {
                let _ = t.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_submission_order() {
        std::thread::scope(|scope| {
            let mut ahead = Ahead::new(scope, "test-ahead", 3);
            assert!(ahead.start());
            assert_eq!(ahead.take(), None);
            for i in 0..100u64 {
                // Later jobs finish first on some workers: the order must not depend on it.
                ahead.submit(move || {
                    std::thread::sleep(std::time::Duration::from_micros((100 - i) % 7 * 50));
                    i * i
                });
            }
            let got: Vec<u64> = (0..100).map(|_| ahead.take().unwrap()).collect();
            assert_eq!(got, (0..100u64).map(|i| i * i).collect::<Vec<_>>());
            assert_eq!(ahead.take(), None);
        });
    }

    #[test]
    fn a_lost_worker_answers_none_and_the_others_go_on() {
        // The scope ends normally: the panic stays in its worker.
        std::thread::scope(|scope| {
            let mut ahead: Ahead<u32> = Ahead::new(scope, "test-ahead", 2);
            assert!(ahead.start());
            ahead.submit(|| panic!("a decoding job panics"));
            ahead.submit(|| 2);
            ahead.submit(|| 3);
            assert_eq!(ahead.take(), None);
            assert_eq!(ahead.take(), Some(2));
            assert_eq!(ahead.take(), None);
        });
    }

    /// Jobs borrow from outside the scope (as ingest's jobs borrow the Kafka messages), and
    /// no thread starts before the first job.
    #[test]
    fn jobs_borrow_what_outlives_the_scope() {
        let payloads: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; 1000 + usize::from(i)]).collect();
        std::thread::scope(|scope| {
            let mut ahead = Ahead::new(scope, "test-ahead", 2);
            assert!(ahead.workers.is_empty());
            assert!(ahead.start());
            for p in &payloads {
                let p: &[u8] = p;
                ahead.submit(move || {
                    (
                        p.as_ptr() as usize,
                        p.iter().map(|&b| u64::from(b)).sum::<u64>(),
                    )
                });
            }
            for p in &payloads {
                let sum = p.iter().map(|&b| u64::from(b)).sum::<u64>();
                assert_eq!(ahead.take(), Some((p.as_ptr() as usize, sum)));
            }
        });
    }
}
