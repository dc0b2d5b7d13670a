//! What the service knows of its streams between Kafka and the API: one writer (ingest)
//! publishes each stream's snapshot after every batch, many readers (the HTTP handlers, the
//! history recorder) clone it. `published` is the pattern both stream kinds share, `streams`
//! and `feature_streams` their handles, `history` each stream's default model over time (the
//! ring; `recorder` the task that fills it), `quality` each stream's live test-then-train
//! figures, `sightings` which declared fields and target its first events carried,
//! `arrivals` what arrived on its topic (messages read, refused, dead-lettered),
//! `wide_columns` the columns a wide feature stream keeps for paper 004's Lasso path.

pub mod arrivals;
pub mod feature_streams;
pub mod history;
pub mod published;
pub mod quality;
pub mod recorder;
pub mod sightings;
pub mod streams;
pub mod wide_columns;
