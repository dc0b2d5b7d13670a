//! `ravel check`'s questions to the cluster: the brokers (reachability, login, TLS), every
//! topic ravel reads or owns, the topics it would create (validated, never created), the
//! consumer group, the topics' configuration (compaction, retention) and the effective client
//! configuration. Kept apart from the report and the registry check because it is most of
//! the command.

use super::{Finding, Status};
use crate::config::Config;
use crate::health::Refusal;
use crate::kafka::topics::{self, Found, Needed};
use crate::kafka::{Client, Heard, KafkaClients, authz, redacted};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::time::Duration;

/// Brokers, topics, group and client configuration.
pub(super) fn check(config: &Config, timeout: Duration, out: &mut Vec<Finding>) {
    if config.kafka.embedded() {
        out.push(Finding::new(
            "kafka.brokers",
            Status::Info,
            "empty: `ravel serve` starts an embedded broker in its own process and makes every \
             topic there, so there is no cluster to check; set kafka.brokers (--brokers, \
             RAVEL_KAFKA__BROKERS) to check one",
        ));
        return;
    }
    let brokers = config.kafka.brokers.as_str();
    let clients = KafkaClients::new(&config.kafka, brokers);
    out.push(Finding::new(
        "kafka.client_config",
        Status::Info,
        client_config(&clients, config.ingest.lag_interval_ms),
    ));
    let mut cfg = clients.config(Client::Check, &[("group.id", clients.group().to_string())]);
    // Never create a topic by asking for it, whatever `kafka.options` say.
    cfg.set("allow.auto.create.topics", "false");
    let probe: BaseConsumer<Heard> = match cfg.create_with_context(Heard::default()) {
        Ok(p) => p,
        Err(e) => {
            out.push(
                Finding::new(
                    "kafka.options",
                    Status::Problem,
                    format!("librdkafka refuses the client configuration: {}", clients.scrub(&e.to_string())),
                )
                .fix("correct the property it names under [kafka.options] (or RAVEL_KAFKA__OPTIONS__...)"),
            );
            return;
        }
    };
    let md = match probe.fetch_metadata(None::<&str>, timeout) {
        Ok(md) => md,
        Err(e) => {
            out.push(unreachable(
                brokers,
                timeout,
                &e,
                &Heard::said_by(&probe),
                &clients,
            ));
            return;
        }
    };
    let broker_count = md.brokers().len().max(1);
    let cluster_id = probe.client().fetch_cluster_id(timeout);
    let embedded = crate::kafka::is_embedded(cluster_id.as_deref());
    out.push(Finding::new(
        "kafka.brokers",
        Status::Ok,
        format!(
            "{broker_count} broker{} answered at {brokers} (cluster {}{}); connected and authenticated",
            if broker_count == 1 { "" } else { "s" },
            cluster_id.as_deref().unwrap_or("id unknown"),
            if embedded { ", the embedded broker" } else { "" }
        ),
    ));
    let replication = config
        .kafka
        .topic_replication
        .min(broker_count as i16)
        .max(1);
    let principal = principal(config);
    let mut to_create: Vec<&Needed> = Vec::new();
    let mut existing: Vec<(&Needed, usize)> = Vec::new();
    let needed = topics::needed(config);
    for n in &needed {
        let check = format!("topic:{}", n.topic);
        let role = role_words(config, n);
        match topics::found(&probe, &n.topic, timeout) {
            Found::Exists {
                partitions,
                replication: replicas,
            } => {
                existing.push((n, partitions));
                let detail = format!(
                    "{role}: exists, {partitions} partition{}, replication {replicas}",
                    if partitions == 1 { "" } else { "s" }
                );
                if n.role == "feature_stream" && partitions > 1 {
                    out.push(
                        Finding::new(
                            check,
                            Status::Problem,
                            format!(
                                "{detail}; a feature stream needs one partition: labels come \
                                 before features and passes keep their order, which Kafka \
                                 keeps only within a partition"
                            ),
                        )
                        .fix(format!(
                            "recreate the topic with one partition: {}",
                            topics::create_command_on(
                                cluster_id.as_deref(),
                                brokers,
                                &Needed {
                                    partitions: 1,
                                    ..n.clone()
                                },
                                replication
                            )
                        )),
                    );
                } else {
                    out.push(Finding::new(check, Status::Ok, detail));
                }
            }
            Found::Missing if n.create => to_create.push(n),
            Found::Missing => {
                let command =
                    topics::create_command_on(cluster_id.as_deref(), brokers, n, replication);
                out.push(
                    Finding::new(
                        check,
                        Status::Problem,
                        format!(
                            "{role}: does not exist; {}",
                            topics::missing_reason(n, false)
                        ),
                    )
                    .fix(format!(
                        "{command}; or set {} = true to let ravel create it",
                        n.switch
                    )),
                );
            }
            Found::Denied(e) => out.push(
                Finding::new(
                    check,
                    Status::Problem,
                    format!(
                        "{role}: Kafka denies describe on topic '{}' to this client ({e})",
                        n.topic
                    ),
                )
                .fix(authz::grant_command(
                    brokers,
                    &principal,
                    "topic",
                    &n.topic,
                    operations(n),
                )),
            ),
        }
    }
    if !to_create.is_empty() {
        out.extend(creations(
            &clients,
            config,
            &to_create,
            replication,
            embedded,
            timeout,
            &principal,
        ));
    }
    if let Some(f) = group(&probe, config, &existing, timeout, &principal) {
        out.push(f);
    }
    out.extend(topic_configs(&clients, &existing, embedded, timeout));
}

/// The cluster did not answer the metadata request.
fn unreachable(
    brokers: &str,
    timeout: Duration,
    e: &KafkaError,
    heard: &[String],
    clients: &KafkaClients,
) -> Finding {
    let said = if heard.is_empty() {
        String::new()
    } else {
        format!("; librdkafka said: {}", heard.join("; "))
    };
    let refusal = heard.iter().find_map(|h| Refusal::of(h));
    let (what, refused_fix) = Refusal::explain(refusal, brokers);
    let fix = if refusal.is_some() {
        refused_fix
    } else {
        "check kafka.brokers (--brokers, RAVEL_KAFKA__BROKERS): host:port of brokers reachable \
         from here, and that the cluster is up; on a secured listener set security.protocol \
         and its settings under [kafka.options]"
            .to_string()
    };
    Finding::new(
        "kafka.brokers",
        Status::Problem,
        clients.scrub(&format!(
            "{what} (kafka.brokers): no metadata within {} ms ({e}){said}",
            timeout.as_millis()
        )),
    )
    .fix(fix)
}

/// The effective configuration of the service's consumer, secrets as `***`.
fn client_config(clients: &KafkaClients, lag_interval_ms: u64) -> String {
    let mut s = String::from(
        "the consumer's effective librdkafka configuration (the dead-letter, labels and state \
         clients differ only in client.id and their own settings), secrets as ***:",
    );
    for (k, v) in redacted(&clients.consumer(lag_interval_ms)) {
        s.push_str(&format!("\n  {k} = {v}"));
    }
    s
}

/// Who ravel is to the cluster, for the ACL commands: the SASL user when one is configured.
fn principal(config: &Config) -> String {
    config
        .kafka
        .librdkafka_options()
        .find(|(k, _)| k == "sasl.username")
        .map_or_else(
            || "User:<ravel's principal>".to_string(),
            |(_, v)| format!("User:{v}"),
        )
}

/// What ravel does with a topic, in the user's words.
fn role_words(config: &Config, n: &Needed) -> String {
    let of = |topic: &str| -> String {
        if let Some(s) = config.streams.iter().find(|s| s.topic() == topic) {
            format!("stream '{}'", s.name)
        } else if let Some(f) = config.feature_streams.iter().find(|f| f.topic() == topic) {
            format!("feature stream '{}'", f.name)
        } else if let Some(sc) = config.scorers.iter().find(|sc| sc.topic == topic) {
            format!("scorer '{}'", sc.name)
        } else {
            format!("topic '{topic}'")
        }
    };
    match n.role {
        "stream" => format!("{} reads it", of(&n.topic)),
        "feature_stream" => format!(
            "{} reads it (and writes the labels sent over HTTP to it)",
            of(&n.topic)
        ),
        "dead_letters" => {
            let source = n.topic.strip_suffix(".dlq").unwrap_or(&n.topic);
            format!("the dead letters of {}", of(source))
        }
        "scorer" => format!("{} reads its events there", of(&n.topic)),
        "scorer_output" => match config.scorers.iter().find(|sc| sc.output_topic == n.topic) {
            Some(sc) => format!("scorer '{}' writes its predictions there", sc.name),
            None => format!("topic '{}'", n.topic),
        },
        _ => "the state store's changelog (state.store = \"kafka\")".to_string(),
    }
}

/// The ACL operations ravel needs on a topic of this role.
fn operations(n: &Needed) -> &'static [&'static str] {
    match (n.role, n.create) {
        ("stream" | "scorer", _) => &["Describe", "Read"],
        ("scorer_output", false) => &["Describe", "Write"],
        ("scorer_output", true) => &["Describe", "Write", "Create"],
        ("feature_stream", _) => &["Describe", "Read", "Write"],
        ("dead_letters", false) => &["Describe", "Write"],
        ("dead_letters", true) => &["Describe", "Write", "Create"],
        (_, false) => &["Describe", "Read", "Write"],
        (_, true) => &["Describe", "Read", "Write", "Create"],
    }
}

/// The missing topics ravel creates at start: whether the cluster would let it (CreateTopics
/// with `validate_only`, which creates nothing), where the broker serves CreateTopics.
fn creations(
    clients: &KafkaClients,
    config: &Config,
    missing: &[&Needed],
    replication: i16,
    embedded: bool,
    timeout: Duration,
    principal: &str,
) -> Vec<Finding> {
    let brokers = clients.brokers();
    let will = |n: &Needed, note: &str| {
        Finding::new(
            format!("topic:{}", n.topic),
            Status::Info,
            format!(
                "{}: does not exist; ravel will create it at start ({} = true){note}",
                role_words(config, n),
                n.switch
            ),
        )
    };
    if embedded {
        let note = ", on the embedded broker through a metadata request that allows automatic \
                    creation (its CreateTopics is not implemented)";
        return missing.iter().map(|n| will(n, note)).collect();
    }
    let not_checked = |why: &str| -> Vec<Finding> {
        missing
            .iter()
            .map(|n| {
                will(
                    n,
                    &format!("; whether the cluster lets it could not be checked ({why})"),
                )
            })
            .collect()
    };
    let admin: AdminClient<DefaultClientContext> =
        match clients.config(Client::CheckAdmin, &[]).create() {
            Ok(a) => a,
            Err(e) => return not_checked(&clients.scrub(&e.to_string())),
        };
    let new: Vec<NewTopic> = missing.iter().map(|n| n.new_topic(replication)).collect();
    let opts = AdminOptions::new()
        .validate_only(true)
        .operation_timeout(Some(timeout))
        .request_timeout(Some(timeout));
    let answers = match futures::executor::block_on(admin.create_topics(&new, &opts)) {
        Ok(a) => a,
        Err(e) => return not_checked(&e.to_string()),
    };
    let mut out = Vec::new();
    for n in missing {
        let answer = answers.iter().find(|r| match r {
            Ok(t) | Err((t, _)) => t == &n.topic,
        });
        out.push(match answer {
            Some(Ok(_)) => will(
                n,
                &format!(
                    ", with {} partitions and replication {replication} (validated: the \
                     cluster accepts the creation)",
                    n.partitions
                ),
            ),
            Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) => Finding::new(
                format!("topic:{}", n.topic),
                Status::Ok,
                format!("{}: exists (created meanwhile)", role_words(config, n)),
            ),
            Some(Err((_, code))) if authz::is_denied(*code) => {
                let command = topics::create_command(brokers, n, replication);
                Finding::new(
                    format!("topic:{}", n.topic),
                    Status::Problem,
                    format!(
                        "{}: does not exist, and Kafka would deny ravel its creation: {}",
                        role_words(config, n),
                        topics::create_denied(n, &code.to_string(), &command)
                    ),
                )
                .fix(format!(
                    "{}; or {command} and set {} = false",
                    authz::grant_command(brokers, principal, "topic", &n.topic, &["Create"]),
                    n.switch
                ))
            }
            Some(Err((_, code)))
                if matches!(
                    code,
                    RDKafkaErrorCode::UnsupportedVersion
                        | RDKafkaErrorCode::UnsupportedFeature
                        | RDKafkaErrorCode::OperationTimedOut
                        | RDKafkaErrorCode::RequestTimedOut
                ) =>
            {
                will(
                    n,
                    &format!("; whether the cluster lets it could not be checked ({code})"),
                )
            }
            Some(Err((_, code))) => Finding::new(
                format!("topic:{}", n.topic),
                Status::Problem,
                format!(
                    "{}: does not exist, and the cluster would refuse to create it with {} \
                     partitions and replication {replication}: {code}",
                    role_words(config, n),
                    n.partitions
                ),
            )
            .fix(format!(
                "{}; or set kafka.topic_partitions / kafka.topic_replication to what the \
                 cluster allows",
                topics::create_command(brokers, n, replication)
            )),
            None => will(n, "; the cluster did not answer about it"),
        });
    }
    out
}

/// Whether the consumer group answers: the offsets it has committed on the topics that
/// exist (OffsetFetch, which reads no message and commits nothing).
fn group(
    probe: &BaseConsumer<Heard>,
    config: &Config,
    existing: &[(&Needed, usize)],
    timeout: Duration,
    principal: &str,
) -> Option<Finding> {
    let group = &config.kafka.group_id;
    let check = format!("group:{group}");
    let mut tpl = TopicPartitionList::new();
    for (n, partitions) in existing.iter().filter(|(n, _)| n.is_input()) {
        for p in 0..*partitions {
            tpl.add_partition(&n.topic, p as i32);
        }
    }
    if tpl.count() == 0 {
        return None;
    }
    let grant = || {
        authz::grant_command(
            config.kafka.brokers.as_str(),
            principal,
            "group",
            group,
            &["Describe", "Read"],
        )
    };
    match probe.committed_offsets(tpl, timeout) {
        Ok(got) => {
            let denied = got.elements().iter().find_map(|e| match e.error() {
                Err(KafkaError::OffsetFetch(code)) if authz::is_denied(code) => Some(code),
                _ => None,
            });
            if let Some(code) = denied {
                return Some(
                    Finding::new(
                        check,
                        Status::Problem,
                        format!("Kafka denies reading the offsets of group '{group}' ({code})"),
                    )
                    .fix(grant()),
                );
            }
            let elements = got.elements();
            let with_offset: Vec<_> = elements
                .iter()
                .filter(|e| matches!(e.offset(), Offset::Offset(_)))
                .collect();
            let committed = with_offset.len();
            let answers = format!(
                "consumer group '{group}' (kafka.group_id) answers: offsets committed on \
                 {committed} of its {} partitions",
                got.count()
            );
            // Standalone assignment names a second instance by the commits' metadata: a
            // cluster that drops it (Tansu 0.6.0) cannot show one.
            let standalone = config.kafka.assignment == crate::config::Assignment::Standalone;
            if standalone && committed > 0 && with_offset.iter().all(|e| e.metadata().is_empty()) {
                return Some(
                    Finding::new(
                        check,
                        Status::Info,
                        format!(
                            "{answers}, none with metadata: if ravel made them in standalone \
                             assignment (kafka.assignment), this cluster does not keep the \
                             commits' metadata (Tansu 0.6.0 drops it), by which a second \
                             instance on the group is named; such an instance would read every \
                             message again unseen"
                        ),
                    )
                    .fix(
                        "run one instance per kafka.group_id, or set kafka.assignment = \"group\"",
                    ),
                );
            }
            Some(Finding::new(check, Status::Ok, answers))
        }
        Err(KafkaError::OffsetFetch(code)) if authz::is_denied(code) => Some(
            Finding::new(
                check,
                Status::Problem,
                format!(
                    "Kafka denies this client the consumer group '{group}' (kafka.group_id): \
                     {code}"
                ),
            )
            .fix(grant()),
        ),
        Err(e) => Some(Finding::new(
            check,
            Status::Info,
            format!("the consumer group '{group}' could not be checked: {e}"),
        )),
    }
}

/// The settings of the existing topics that matter (DescribeConfigs): the state topic's
/// compaction, the retention of the topics ravel reads.
fn topic_configs(
    clients: &KafkaClients,
    existing: &[(&Needed, usize)],
    embedded: bool,
    timeout: Duration,
) -> Vec<Finding> {
    let asked: Vec<&Needed> = existing
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| n.is_input() || n.role == "state")
        .collect();
    if asked.is_empty() {
        return Vec::new();
    }
    let not_checked = |why: &str| -> Vec<Finding> {
        asked
            .iter()
            .filter(|n| n.role == "state")
            .map(|n| {
                Finding::new(
                    format!("topic-config:{}", n.topic),
                    Status::Info,
                    format!("compaction (cleanup.policy = compact) could not be checked: {why}"),
                )
            })
            .collect()
    };
    if embedded {
        return not_checked(
            "the embedded broker does not answer DescribeConfigs (it neither compacts nor \
             keeps more than about 5 MB per partition: fine for tests and demos)",
        );
    }
    let admin: AdminClient<DefaultClientContext> =
        match clients.config(Client::CheckAdmin, &[]).create() {
            Ok(a) => a,
            Err(e) => return not_checked(&clients.scrub(&e.to_string())),
        };
    let specs: Vec<ResourceSpecifier> = asked
        .iter()
        .map(|n| ResourceSpecifier::Topic(&n.topic))
        .collect();
    let opts = AdminOptions::new()
        .operation_timeout(Some(timeout))
        .request_timeout(Some(timeout));
    let answers = match futures::executor::block_on(admin.describe_configs(&specs, &opts)) {
        Ok(a) => a,
        Err(e) => return not_checked(&format!("the broker did not answer DescribeConfigs ({e})")),
    };
    let mut out = Vec::new();
    // librdkafka returns the resources in the order they were asked for.
    for (n, answer) in asked.iter().zip(answers) {
        match answer {
            Ok(resource) => {
                let value = |k: &str| resource.get(k).and_then(|e| e.value.clone());
                let retention = value("retention.ms").and_then(|v| v.parse().ok());
                out.extend(topic_settings(
                    n,
                    clients.brokers(),
                    value("cleanup.policy").as_deref(),
                    retention,
                ));
            }
            Err(code) if n.role == "state" => out.push(Finding::new(
                format!("topic-config:{}", n.topic),
                Status::Info,
                format!(
                    "compaction (cleanup.policy = compact) could not be checked: {code}{}",
                    if authz::is_denied(code) {
                        " (DescribeConfigs needs the DESCRIBE_CONFIGS permission on the topic)"
                    } else {
                        ""
                    }
                ),
            )),
            Err(_) => {}
        }
    }
    out
}

/// What a topic's `cleanup.policy` and `retention.ms` mean for ravel.
fn topic_settings(
    n: &Needed,
    brokers: &str,
    cleanup: Option<&str>,
    retention_ms: Option<i64>,
) -> Option<Finding> {
    let check = format!("topic-config:{}", n.topic);
    let alter = |setting: &str| {
        format!(
            "kafka-configs.sh --bootstrap-server {brokers} --alter --entity-type topics \
             --entity-name {} --add-config {setting}",
            n.topic
        )
    };
    let deletes = cleanup.is_none_or(|p| p.split(',').any(|p| p.trim() == "delete"));
    let retention = match retention_ms {
        Some(ms) if ms >= 0 => Some(ms),
        _ => None,
    };
    match n.role {
        "state" => match cleanup {
            Some("compact") => Some(Finding::new(
                check,
                Status::Ok,
                "the state topic is compacted (cleanup.policy = compact)",
            )),
            other => Some(
                Finding::new(
                    check,
                    Status::Problem,
                    format!(
                        "the state topic has cleanup.policy = {}: its records are deleted after \
                         retention.ms{}, and the statistics of a partition whose record is gone \
                         are lost at the next restart; it must be compacted",
                        other.unwrap_or("(not reported)"),
                        retention.map_or(String::new(), |ms| format!(" ({})", duration(ms)))
                    ),
                )
                .fix(alter("cleanup.policy=compact")),
            ),
        },
        _ if !deletes => None,
        role => retention.map(|ms| {
            let why = if role == "feature_stream" {
                "a feature stream reads its labels and every pass of features from this topic: \
                 whatever is deleted before it is read is lost to the selection"
            } else {
                "rows older than this are deleted, so a start without saved state (or one that \
                 falls behind further) never sees them"
            };
            Finding::new(
                check,
                Status::Info,
                format!("retention.ms = {ms} ({}): {why}", duration(ms)),
            )
            .fix(format!(
                "if that is too short: {}",
                alter("retention.ms=-1")
            ))
        }),
    }
}

/// Milliseconds in the largest whole unit that fits.
fn duration(ms: i64) -> String {
    const UNITS: [(i64, &str); 4] = [
        (86_400_000, "days"),
        (3_600_000, "hours"),
        (60_000, "minutes"),
        (1000, "seconds"),
    ];
    UNITS
        .iter()
        .find(|(u, _)| ms >= *u)
        .map_or(format!("{ms} ms"), |(u, name)| {
            format!("{:.1} {name}", ms as f64 / *u as f64)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needed(role: &'static str) -> Needed {
        Needed {
            topic: "t".into(),
            role,
            partitions: 4,
            create: true,
            switch: "state.create_topic",
        }
    }

    #[test]
    fn the_state_topic_must_be_compacted() {
        let n = needed("state");
        let ok = topic_settings(&n, "k:9092", Some("compact"), Some(604_800_000)).unwrap();
        assert_eq!(ok.status, Status::Ok);
        let bad = topic_settings(&n, "k:9092", Some("delete"), Some(604_800_000)).unwrap();
        assert_eq!(bad.status, Status::Problem);
        assert!(
            bad.detail.contains("cleanup.policy = delete") && bad.detail.contains("7.0 days"),
            "{}",
            bad.detail
        );
        assert_eq!(
            bad.fix.as_deref(),
            Some(
                "kafka-configs.sh --bootstrap-server k:9092 --alter --entity-type topics \
                 --entity-name t --add-config cleanup.policy=compact"
            )
        );
        let both = topic_settings(&n, "k:9092", Some("compact,delete"), None).unwrap();
        assert_eq!(both.status, Status::Problem);
    }

    #[test]
    fn retention_of_the_topics_ravel_reads_is_said_when_it_deletes() {
        let f = topic_settings(
            &needed("feature_stream"),
            "k",
            Some("delete"),
            Some(3_600_000),
        )
        .unwrap();
        assert_eq!(f.status, Status::Info);
        assert!(
            f.detail
                .starts_with("retention.ms = 3600000 (1.0 hours): a feature stream"),
            "{}",
            f.detail
        );
        assert!(f.fix.unwrap().ends_with("--add-config retention.ms=-1"));
        // Kept forever, or compacted only: nothing to say.
        assert_eq!(
            topic_settings(&needed("stream"), "k", Some("delete"), Some(-1)),
            None
        );
        assert_eq!(
            topic_settings(&needed("stream"), "k", Some("compact"), Some(1000)),
            None
        );
        assert_eq!(
            topic_settings(&needed("dead_letters"), "k", Some("delete"), Some(1000))
                .unwrap()
                .status,
            Status::Info
        );
    }

    #[test]
    fn durations_read_in_their_largest_unit() {
        assert_eq!(duration(90_000), "1.5 minutes");
        assert_eq!(duration(5), "5 ms");
    }
}
