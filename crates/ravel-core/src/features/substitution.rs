//! One API for OS and Asy-OS: `Substitution` is either running selection behind the same
//! `push`, `end_pass`, `summary`, `snapshot` and `finish`, so a caller (the service's feature
//! streams, `ravel select`, tests, benches) writes its feed loop once and picks the method when
//! it starts the selection. Each call is the underlying type's own; nothing is recomputed here,
//! so the numbers are those of `OnlineSubstitution` and `AsyncSubstitution`.

use super::{
    AsyncSubstitution, FeatureError, Labels, OnlineSubstitution, OsParams, Outcome,
    SelectionSnapshot, Summary,
};
use std::sync::Arc;

/// A running OS or Asy-OS selection (OS boxed: its state is inline, Asy-OS's is behind its
/// threads).
pub enum Substitution {
    /// Online substitution (one thread).
    Os(Box<OnlineSubstitution>),
    /// Asynchronous parallel OS (q worker threads).
    Asy(AsyncSubstitution),
}

impl Substitution {
    /// OS (Algorithm 1) on the calling thread.
    pub fn os(labels: Labels, params: &OsParams) -> Result<Substitution, FeatureError> {
        Ok(Substitution::Os(Box::new(OnlineSubstitution::new(
            labels, params,
        )?)))
    }

    /// Asy-OS (Algorithms 2-3) on `workers` threads, even for one worker.
    pub fn asy(
        labels: Labels,
        params: &OsParams,
        workers: usize,
    ) -> Result<Substitution, FeatureError> {
        Ok(Substitution::Asy(AsyncSubstitution::start(
            labels, params, workers,
        )?))
    }

    /// OS for `workers = 1` (one worker of Asy-OS is OS exactly, without the thread), Asy-OS
    /// on `workers` threads otherwise.
    pub fn start(
        labels: Labels,
        params: &OsParams,
        workers: usize,
    ) -> Result<Substitution, FeatureError> {
        if workers == 1 {
            Substitution::os(labels, params)
        } else {
            Substitution::asy(labels, params, workers)
        }
    }

    /// "os" or "asy-os", as in `Summary::method`.
    pub fn method(&self) -> &'static str {
        match self {
            Substitution::Os(_) => "os",
            Substitution::Asy(_) => "asy-os",
        }
    }

    /// Worker threads (1 for OS).
    pub fn workers(&self) -> usize {
        match self {
            Substitution::Os(_) => 1,
            Substitution::Asy(asy) => asy.workers(),
        }
    }

    /// The labels y.
    pub fn labels(&self) -> &Labels {
        match self {
            Substitution::Os(os) => os.labels(),
            Substitution::Asy(asy) => asy.labels(),
        }
    }

    /// Feature `index` (its identity: a returning index is the same feature) named `name`
    /// arrives with its n values. Bad values are an error and change nothing. The outcome of
    /// the step when it is known now: OS applies the feature before returning (`Some`);
    /// Asy-OS queues it for its worker (`None`).
    pub fn push(
        &mut self,
        index: usize,
        name: &str,
        values: Arc<[f64]>,
    ) -> Result<Option<Outcome>, FeatureError> {
        match self {
            Substitution::Os(os) => os.push(index, name, &values).map(Some),
            Substitution::Asy(asy) => asy.push(index, name, values).map(|()| None),
        }
    }

    /// Closes the current pass (records its final loss; Asy-OS waits for the queued
    /// features first). Also happens by itself when the stream's first feature comes back.
    pub fn end_pass(&mut self) -> Result<(), FeatureError> {
        match self {
            Substitution::Os(os) => {
                os.end_pass();
                Ok(())
            }
            Substitution::Asy(asy) => asy.end_pass(),
        }
    }

    /// The objective now (L(u_C) for Asy-OS, whose workers may still be applying features).
    pub fn loss(&self) -> f64 {
        match self {
            Substitution::Os(os) => os.loss(),
            Substitution::Asy(asy) => asy.loss(),
        }
    }

    /// The state after every feature pushed so far.
    pub fn summary(&self) -> Result<Summary, FeatureError> {
        match self {
            Substitution::Os(os) => Ok(os.summary()),
            Substitution::Asy(asy) => asy.summary(),
        }
    }

    /// A frozen copy of the state after every feature pushed so far; the selection goes on.
    pub fn snapshot(&self) -> Result<SelectionSnapshot, FeatureError> {
        match self {
            Substitution::Os(os) => Ok(os.snapshot()),
            Substitution::Asy(asy) => asy.snapshot(),
        }
    }

    /// Ends the selection (Asy-OS: stops the workers once every queued feature is applied)
    /// and returns its final state.
    pub fn finish(self) -> Result<SelectionSnapshot, FeatureError> {
        match self {
            Substitution::Os(os) => Ok(os.snapshot()),
            Substitution::Asy(asy) => asy.finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::Loss;

    /// Two informative columns, a constant one and noise, over two passes.
    fn feed(sel: &mut Substitution) -> Vec<Option<Outcome>> {
        let n = 40;
        let cols: Vec<Vec<f64>> = (0..6)
            .map(|j| {
                (0..n)
                    .map(|i| match j {
                        2 => 3.0,
                        _ => (((i * (j + 3) * 7919) % 97) as f64 / 97.0) - 0.5,
                    })
                    .collect()
            })
            .collect();
        let mut outcomes = vec![];
        for _ in 0..2 {
            for (j, c) in cols.iter().enumerate() {
                outcomes.push(sel.push(j, &format!("x{j}"), c.clone().into()).unwrap());
            }
            sel.end_pass().unwrap();
        }
        outcomes
    }

    fn labels() -> Labels {
        let y = (0..40)
            .map(|i| ((i * 13 % 17) as f64 / 17.0) + ((i * 7 * 3 % 97) as f64 / 97.0))
            .collect();
        Labels::new(y, Loss::Squared).unwrap()
    }

    #[test]
    fn start_picks_os_for_one_worker_and_asy_os_for_more() {
        let params = OsParams::new(2, Loss::Squared);
        let os = Substitution::start(labels(), &params, 1).unwrap();
        assert_eq!((os.method(), os.workers()), ("os", 1));
        let asy = Substitution::start(labels(), &params, 2).unwrap();
        assert_eq!((asy.method(), asy.workers()), ("asy-os", 2));
        let one = Substitution::asy(labels(), &params, 1).unwrap();
        assert_eq!((one.method(), one.workers()), ("asy-os", 1));
        assert!(Substitution::start(labels(), &params, 3).is_err());
    }

    #[test]
    fn os_and_one_worker_asy_os_agree_through_the_one_api() {
        let params = OsParams::new(2, Loss::Squared);
        let mut os = Substitution::os(labels(), &params).unwrap();
        let mut asy = Substitution::asy(labels(), &params, 1).unwrap();
        let (a, b) = (feed(&mut os), feed(&mut asy));
        // OS reports each step's outcome; Asy-OS does not know it when the push returns.
        assert!(a.iter().all(Option::is_some));
        assert_eq!(a[2], Some(Outcome::Constant));
        assert!(b.iter().all(Option::is_none));
        let (sa, sb) = (os.summary().unwrap(), asy.summary().unwrap());
        assert_eq!(sa.passes, 2);
        assert!(sa.counters.entered > 0, "nothing was selected");
        assert_eq!(sa.loss.to_bits(), sb.loss.to_bits());
        assert_eq!(sa.loss_per_pass, sb.loss_per_pass);
        assert_eq!(sa.counters, sb.counters);
        assert_eq!(os.loss().to_bits(), asy.loss().to_bits());
        let snap = os.snapshot().unwrap();
        let (fa, fb) = (os.finish().unwrap(), asy.finish().unwrap());
        assert_eq!(fa.scores(), snap.scores());
        assert_eq!(fa.scores(), fb.scores());
        assert_eq!(fa.summary().method, "os");
        assert_eq!(fb.summary().method, "asy-os");
    }
}
