//! Checkpoints and commits: `positions` (per partition, the next offset whose row is not yet
//! in the statistics), `persist` (what a stream's checkpoint holds, its writer thread, and
//! loading them at start), `commit` (which offsets may be committed once the rows before them
//! are durable).

pub mod commit;
pub mod persist;
pub mod positions;
