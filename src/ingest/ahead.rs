//! Decoding ahead: a few long-lived threads that decode messages while the ingest thread is
//! still polling, folding, or applying earlier feature-stream columns, so that parsing JSON
//! (the cost of JSON ingest, and about half of a feature column's) overlaps the rest of the
//! loop instead of adding to it.
//!
//! Jobs go to the workers in turn and their results are taken back in the same turn, so they
//! come back in the order they were submitted (the order the messages were read). The ingest
//! thread takes exactly one result per job; a job whose worker is gone answers `None` and the
//! caller decodes the message itself, so a lost thread costs speed, never a message.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;

type Job<T> = Box<dyn FnOnce() -> T + Send>;

struct Worker<T> {
    jobs: Option<Sender<Job<T>>>,
    results: Receiver<T>,
    thread: Option<JoinHandle<()>>,
}

/// Worker threads that run jobs in turn; results come back in submission order.
pub struct Ahead<T> {
    workers: Vec<Worker<T>>,
    submitted: usize,
    taken: usize,
}

impl<T: Send + 'static> Ahead<T> {
    /// `threads` workers (at least one) named `name-k`; fewer if a thread cannot start.
    pub fn new(name: &str, threads: usize) -> Ahead<T> {
        let mut workers = Vec::new();
        for k in 0..threads.max(1) {
            let (job_tx, job_rx) = channel::<Job<T>>();
            let (result_tx, result_rx) = channel();
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-{k}"))
                .spawn(move || {
                    while let Ok(job) = job_rx.recv() {
                        if result_tx.send(job()).is_err() {
                            break;
                        }
                    }
                });
            match spawned {
                Ok(thread) => workers.push(Worker {
                    jobs: Some(job_tx),
                    results: result_rx,
                    thread: Some(thread),
                }),
                Err(e) => tracing::warn!(error = %e, "cannot start a decoding thread"),
            }
        }
        Ahead {
            workers,
            submitted: 0,
            taken: 0,
        }
    }

    /// Whether jobs can be submitted (some worker started).
    pub fn available(&self) -> bool {
        !self.workers.is_empty()
    }

    /// Queues a job; its result is the one `take` returns after those of the jobs before it.
    pub fn submit(&mut self, job: impl FnOnce() -> T + Send + 'static) {
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

impl<T> Drop for Ahead<T> {
    /// Closing the job channels stops the workers; wait for them so none outlives ingest.
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
        let mut ahead = Ahead::new("test-ahead", 3);
        assert!(ahead.available());
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
    }

    #[test]
    fn a_lost_worker_answers_none_and_the_others_go_on() {
        let mut ahead: Ahead<u32> = Ahead::new("test-ahead", 2);
        ahead.submit(|| panic!("a decoding job panics"));
        ahead.submit(|| 2);
        ahead.submit(|| 3);
        assert_eq!(ahead.take(), None);
        assert_eq!(ahead.take(), Some(2));
        assert_eq!(ahead.take(), None);
    }
}
