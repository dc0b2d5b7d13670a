//! Dead letters: a refused message counted, logged at a bounded rate and copied to
//! `<topic>.dlq` with its reason. `rejections` is what the fold and the feature dispatch call;
//! `dlq` the producer on its own thread; `held` the unacknowledged copies and the fence they
//! put on checkpoints (`dlq.on_failure = "block"`); `log_rate` the bound on log lines.

pub mod dlq;
pub mod held;
mod log_rate;
pub mod rejections;

pub(crate) use log_rate::RateLimit;
