//! `ravel check`'s look at the data: for each stream declared with named fields, the topic's
//! latest messages (at most `ingest.field_check_events`, read from the end of each partition
//! by assignment, never committed) decoded with the stream's format as ingest decodes them,
//! and every declared field or target absent from all of them named with the event keys
//! closest to it ("did you mean customer.age"). A misspelled name is otherwise learned
//! quietly: a column of zeros, or no row at all. The look is `crate::declared::data`'s, which
//! a `PUT /v1/streams/{name}` makes too.

use super::{Finding, Status};
use crate::codec::schemad::SchemaRegistry;
use crate::config::{Config, StreamConfig};
use crate::declared::data::Looked;
use crate::health::Health;
use crate::kafka::KafkaClients;
use rdkafka::consumer::BaseConsumer;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The declared fields of each stream against its topic's latest messages. `registry_ok`:
/// the Schema Registry answered the registry check (schema'd streams are sampled only then).
pub(super) fn check(config: &Config, timeout: Duration, registry_ok: bool, out: &mut Vec<Finding>) {
    if config.kafka.embedded() {
        return;
    }
    let named: Vec<&StreamConfig> = config
        .streams
        .iter()
        .filter(|s| s.fields().ok().flatten().is_some())
        .collect();
    if named.is_empty() {
        return;
    }
    let clients = KafkaClients::new(&config.kafka, &config.kafka.brokers);
    let Ok(consumer) = crate::declared::data::consumer(&clients) else {
        // The cluster check names a configuration librdkafka refuses.
        return;
    };
    // The registry's waits end with the check's (a stop of the fetch's backoff).
    let (stop, stopping) = crate::shutdown::channel();
    let registry = config
        .schema_registry
        .configured()
        .then(|| {
            SchemaRegistry::new(
                &config.schema_registry,
                Arc::new(Health::new()),
                Some(stopping),
            )
            .ok()
            .map(Arc::new)
        })
        .flatten();
    let until = Instant::now() + timeout;
    std::thread::spawn(move || {
        std::thread::sleep(timeout);
        drop(stop);
    });
    for s in named {
        let schemad = !s.format.is_ravel() && s.avro_schema_file.is_none();
        if schemad && !registry_ok {
            out.push(Finding::new(
                format!("fields:{}", s.name),
                Status::Info,
                format!(
                    "topic '{}' not sampled: its schemas come from the Schema Registry, which \
                     did not answer (see its check)",
                    s.topic()
                ),
            ));
            continue;
        }
        out.push(stream(config, s, &consumer, registry.as_ref(), until));
    }
}

/// One stream's finding.
fn stream(
    config: &Config,
    s: &StreamConfig,
    consumer: &BaseConsumer,
    registry: Option<&Arc<SchemaRegistry>>,
    until: Instant,
) -> Finding {
    let check = format!("fields:{}", s.name);
    let topic = s.topic();
    let limit = config.ingest.field_check_events as usize;
    match crate::declared::data::look(s, consumer, registry, Some(limit), until) {
        Looked::Unnamed => Finding::new(check, Status::Info, "no named fields"),
        Looked::Failed(why) => Finding::new(check, Status::Problem, why),
        Looked::NoPartition => Finding::new(
            check,
            Status::Info,
            format!("topic '{topic}' has no partition to sample (see its check)"),
        ),
        Looked::Empty => Finding::new(
            check,
            Status::Info,
            format!("topic '{topic}' holds no message to sample yet"),
        ),
        Looked::Unread { read } => Finding::new(
            check,
            Status::Info,
            format!(
                "none of the {read} latest messages of topic '{topic}' is read by name (an \
                 event or a named row): nothing to compare the declared fields with"
            ),
        ),
        Looked::Events { events, absent, .. } => {
            match crate::declared::data::absent_in_words(&absent, events) {
                None => Finding::new(
                    check,
                    Status::Ok,
                    format!(
                        "every declared field{} of stream '{}' is in the {events} latest \
                         messages of topic '{topic}'",
                        if s.target.is_some() {
                            " and the target"
                        } else {
                            ""
                        },
                        s.name,
                    ),
                ),
                Some(w) => Finding::new(
                    check,
                    Status::Problem,
                    format!("stream '{}' on topic '{topic}': {w}", s.name),
                )
                .fix(format!(
                    "correct the names in [[streams]] name = \"{}\" (features, target) to the \
                     events' keys",
                    s.name
                )),
            }
        }
    }
}
