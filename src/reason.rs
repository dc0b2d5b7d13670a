//! Why a message was refused: the `Reason` (the label of `ravel_messages_rejected_total` and
//! the `ravel-reason` header of a dead-letter copy) and the `Rejection` that carries it.
//!
//! It sits below `metrics`, `ingest` and `feature_streams`, which all name reasons, so none of
//! them imports another for it (`codec::format` re-exports it for the message formats).

/// Why a message was refused; `as_str` is the metric label and DLQ header value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Not JSON or binary, or JSON of the wrong shape.
    Malformed,
    /// Wrong number of features (or of targets in a mini-batch).
    Dimension,
    /// NaN or infinity.
    NonFinite,
    /// A finite value beyond +-1e150 (`ravel_core::stats::MAX_ABS_VALUE`): its square would
    /// overflow the statistics.
    Overflow,
    /// A named row with a name the stream does not declare.
    UnknownFeature,
    /// A named row without one of the declared names.
    MissingFeature,
    /// A field whose value is not of its declared kind: text in a numeric field, an object or
    /// a list where one value belongs, a target that is not a number.
    FieldType,
    /// A classification target that is not +1, -1 or 0.
    Label,
    /// Schema'd formats (`format = "avro"`, ...): no Confluent framing, a schema id the
    /// registry does not know, a record that does not match its schema.
    Schema,
    /// Not a bad message: its schema could not be fetched before the service stopped. It is
    /// left unread (neither folded, counted nor dead-lettered) and read again at the next start.
    Unavailable,
    /// Feature streams: a sparse feature's index out of 0..n or repeated.
    Index,
    /// Feature streams: a feature before the labels.
    NoLabels,
    /// Feature streams: labels different from those the features already met.
    LabelsConflict,
    /// Wide feature streams (`wide = true`): keeping the column would take the stream past
    /// its share of `limits.max_memory`.
    MemoryLimit,
}

impl Reason {
    pub const ALL: [Reason; 13] = join(Reason::ROWS, Reason::FEATURES_ONLY);
    /// The reasons an observation stream's message can have.
    pub const ROWS: [Reason; 9] = [
        Reason::Malformed,
        Reason::Dimension,
        Reason::NonFinite,
        Reason::Overflow,
        Reason::UnknownFeature,
        Reason::MissingFeature,
        Reason::FieldType,
        Reason::Label,
        Reason::Schema,
    ];
    /// The reasons a feature stream's message can have.
    pub const FEATURES: [Reason; 8] = join(
        [
            Reason::Malformed,
            Reason::Dimension,
            Reason::NonFinite,
            Reason::Label,
        ],
        Reason::FEATURES_ONLY,
    );
    /// The reasons only a feature stream's message can have.
    const FEATURES_ONLY: [Reason; 4] = [
        Reason::Index,
        Reason::NoLabels,
        Reason::LabelsConflict,
        Reason::MemoryLimit,
    ];
    pub fn as_str(&self) -> &'static str {
        match self {
            Reason::Malformed => "malformed",
            Reason::Dimension => "dimension",
            Reason::NonFinite => "non_finite",
            Reason::Overflow => "overflow",
            Reason::UnknownFeature => "unknown_feature",
            Reason::MissingFeature => "missing_feature",
            Reason::FieldType => "field_type",
            Reason::Label => "label",
            Reason::Schema => "schema",
            Reason::Unavailable => "unavailable",
            Reason::Index => "index",
            Reason::NoLabels => "no_labels",
            Reason::LabelsConflict => "labels_conflict",
            Reason::MemoryLimit => "memory_limit",
        }
    }
}

/// `a` then `b`, as one list of `N = A + B` reasons (the lists above share their parts).
const fn join<const A: usize, const B: usize, const N: usize>(
    a: [Reason; A],
    b: [Reason; B],
) -> [Reason; N] {
    assert!(A + B == N, "the joined list holds both lists");
    let mut out = [Reason::Malformed; N];
    let mut i = 0;
    while i < N {
        out[i] = if i < A { a[i] } else { b[i - A] };
        i += 1;
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    pub reason: Reason,
    pub message: String,
}

/// A message's `got` values (features, rows, labels, names) where it needs `want`: a
/// `Dimension` rejection unless they match, `says` saying what differs.
pub(crate) fn counted(
    got: usize,
    want: usize,
    says: impl FnOnce() -> String,
) -> Result<(), Rejection> {
    if got == want {
        Ok(())
    } else {
        reject(Reason::Dimension, says())
    }
}

pub(crate) fn reject<T>(reason: Reason, message: impl Into<String>) -> Result<T, Rejection> {
    Err(Rejection {
        reason,
        message: message.into(),
    })
}
