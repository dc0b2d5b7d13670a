//! What a message must match (`Schema`): the stream's p, its declared fields and target, and
//! how a missing target or a schema'd value is read. Kept apart from the decoders (`format`,
//! `events`) because both read it and neither owns it.

use ravel_core::fields::Fields;

/// What a message must match.
#[derive(Debug, Clone, Copy)]
pub struct Schema<'a> {
    pub p: usize,
    /// The declared fields (streams declared with names): named rows, named mini-batches and
    /// events go through them (`super::events`).
    pub fields: Option<&'a Fields>,
    /// Events: the target's name or dotted path (streams that declare `target`); every JSON
    /// message is then an event or a named mini-batch.
    pub target: Option<&'a str>,
    /// A row whose target is missing is skipped (the stream's `missing` is not `reject`).
    pub skip_missing_target: bool,
    /// Targets must be +1, -1 or 0.
    pub classification: bool,
    /// Rows to score (`crate::score`): the target is not read, and a row without one is
    /// whole; its y is NaN.
    pub unlabelled: bool,
    /// Schema'd values (`format = "avro"`, ...): decoded by `crate::codec::schemad` into named
    /// fields, then read as an event.
    pub wire: Option<&'a crate::codec::schemad::Wire>,
    /// The message's `__value_schema_id` header, if any.
    pub schema_header: Option<&'a [u8]>,
    /// The stream's mapped paths compiled for its JSON events' fast path
    /// (`super::fast_events`; None: every event is read as a tree).
    pub plan: Option<&'a crate::dotted::Paths>,
}

impl Schema<'static> {
    /// Positional rows of p features: what a stream declared by count reads.
    pub fn positional(p: usize, classification: bool) -> Schema<'static> {
        Schema {
            p,
            fields: None,
            target: None,
            skip_missing_target: false,
            classification,
            unlabelled: false,
            wire: None,
            schema_header: None,
            plan: None,
        }
    }
}
