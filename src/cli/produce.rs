//! `ravel produce`: pushes the rows of a CSV/LIBSVM/NPY file, or a synthetic stream, to a
//! Kafka topic in one of the formats ingest reads (`codec::format`), with a progress bar.
//! Every message is confirmed by the broker before the command reports success.

use super::schemad;
use crate::codec::format;
use crate::config::KafkaConfig;
use crate::config::limits::MemoryArgs;
use anyhow::{Context, anyhow, bail};
use indicatif::{ProgressBar, ProgressStyle};
use ravel_core::data::{Format, OpenOptions, Plan, RowReader};
use ravel_core::synthetic::SyntheticSpec;
use rdkafka::ClientContext;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Kafka's default largest message (`message.max.bytes`).
const MAX_MESSAGE_BYTES: usize = 1_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WireFormat {
    /// `json-named-batch` when the input has feature names (a CSV header), `json` otherwise:
    /// a stream that declares names then matches the columns by name, never by position.
    Auto,
    /// `{"x": [..], "y": v}` rows, or `{"rows": [[..]], "y": [..]}` mini-batches, by position.
    Json,
    /// `{"columns": [names], "rows": [[..]], "y": [..]}`: the header's names once per message,
    /// then rows (needs a CSV header).
    JsonNamedBatch,
    /// `{"features": {"name": v}, "y": v}`, one row per message (needs a CSV header).
    JsonNamed,
    /// The compact little-endian binary format (`RVB1`).
    Binary,
    /// Confluent-framed Avro, one row per message, its schema registered at
    /// --schema-registry (for a stream with `format = "avro"`; needs a CSV header).
    Avro,
    /// Confluent-framed Protobuf (proto3, every value a double), one row per message, its
    /// schema registered at --schema-registry (for a stream with `format = "protobuf"`).
    Protobuf,
    /// Confluent-framed JSON with a registered JSON Schema, one row per message (for a stream
    /// with `format = "json-schema"`).
    JsonSchema,
}

impl WireFormat {
    /// The Confluent-framed formats: the record kind and the flag's value.
    fn schemad(self) -> Option<(schemad::Kind, &'static str)> {
        match self {
            WireFormat::Avro => Some((schemad::Kind::Avro, "avro")),
            WireFormat::Protobuf => Some((schemad::Kind::Protobuf, "protobuf")),
            WireFormat::JsonSchema => Some((schemad::Kind::JsonSchema, "json-schema")),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct ProduceArgs {
    /// Kafka bootstrap servers (e.g. the first line `ravel broker` prints).
    #[arg(long)]
    pub brokers: String,
    /// Topic to send to (the stream's `topic` in the service config).
    #[arg(long)]
    pub topic: String,
    /// CSV (header row), LIBSVM or NPY file of rows.
    #[arg(
        long,
        required_unless_present = "synthetic",
        conflicts_with = "synthetic"
    )]
    pub input: Option<PathBuf>,
    /// Target column of --input: header name or 0-based index (default: the last column).
    #[arg(long, requires = "input")]
    pub target: Option<String>,
    /// Force the format of --input instead of detecting it from the extension.
    #[arg(long, value_name = "FORMAT", value_parser = ["csv", "libsvm", "npy"], requires = "input")]
    pub file_format: Option<String>,
    /// Synthetic design of paper 003, e.g. p=100,k=10,n=10000,seed=1 (n is required).
    #[arg(long)]
    pub synthetic: Option<String>,
    /// Message format on the wire (the service detects it per message). `auto` sends by name
    /// when the input has a header, so a CSV's column order need not match the stream's.
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "auto")]
    pub wire_format: WireFormat,
    /// Rows per message (json, json-named-batch and binary; json-named sends one row per
    /// message).
    #[arg(long, value_name = "ROWS", default_value_t = 100)]
    pub batch_rows: usize,
    /// Schema Registry URL where --wire-format avro, protobuf or json-schema registers the rows' schema
    /// (subject `<topic>-value`).
    #[arg(long, value_name = "URL")]
    pub schema_registry: Option<String>,
    /// USER:PASSWORD for the Schema Registry's basic authentication.
    #[arg(long, value_name = "USER:PASSWORD", requires = "schema_registry")]
    pub schema_registry_auth: Option<String>,
    /// librdkafka property for the producer, KEY=VALUE (SASL, TLS ...); repeatable.
    #[arg(short = 'X', long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    #[command(flatten)]
    pub memory: MemoryArgs,
}

/// What was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Produced {
    pub rows: u64,
    pub messages: u64,
    pub bytes: u64,
}

#[derive(Default)]
struct DeliveryContext {
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl ClientContext for DeliveryContext {}

impl ProducerContext for DeliveryContext {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            self.failed.fetch_add(1, Ordering::Relaxed);
            crate::lock(&self.first_error).get_or_insert_with(|| e.to_string());
        }
    }
}

enum Source {
    File(RowReader),
    Synthetic(ravel_core::synthetic::SyntheticRows),
    /// A CSV file sent by name as it is (`Cells`).
    Cells(Cells),
}

/// A CSV file's cells as JSON values, for named mini-batches: numbers as numbers, missing
/// cells (empty, NA, null ...) as null, anything else as text. The stream maps them through
/// its features (categorical levels, hashed tokens, missing-value policies), so the file is
/// sent as it is, whatever its columns hold.
struct Cells {
    reader: ::csv::Reader<std::io::BufReader<std::fs::File>>,
    path: PathBuf,
    target: usize,
    width: usize,
    record: ::csv::StringRecord,
}

impl Cells {
    fn open(path: &PathBuf, target: Option<&str>) -> anyhow::Result<(Cells, Vec<String>)> {
        let file =
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let delim = if path.extension().is_some_and(|e| e == "tsv") {
            b'\t'
        } else {
            b','
        };
        let mut reader = ::csv::ReaderBuilder::new()
            .delimiter(delim)
            .trim(::csv::Trim::All)
            .from_reader(std::io::BufReader::new(file));
        let header: Vec<String> = reader
            .headers()
            .with_context(|| format!("{}: cannot read the header", path.display()))?
            .iter()
            .map(str::to_string)
            .collect();
        let width = header.len();
        if width < 2 {
            bail!(
                "{}: the header has {width} column(s); a row needs features and a target \
                 (is the file separated by something other than commas?)",
                path.display()
            );
        }
        let t = match target {
            None => width - 1,
            Some(t) => match header.iter().position(|h| h == t) {
                Some(i) => i,
                None => match t.parse::<usize>() {
                    Ok(i) if i < width => i,
                    _ => bail!(
                        "{}: --target {t} is neither a header name nor a column index (the \
                         header: {})",
                        path.display(),
                        header.join(", ")
                    ),
                },
            },
        };
        let names = header
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != t)
            .map(|(_, n)| n.clone())
            .collect();
        let cells = Cells {
            reader,
            path: path.clone(),
            target: t,
            width,
            record: ::csv::StringRecord::new(),
        };
        Ok((cells, names))
    }

    /// Up to `max` rows as one named mini-batch in `out`; how many.
    fn batch(&mut self, names: &[String], max: usize, out: &mut Vec<u8>) -> anyhow::Result<usize> {
        let (mut rows, mut ys) = (Vec::new(), Vec::new());
        while rows.len() < max {
            let more = self.reader.read_record(&mut self.record).map_err(|e| {
                let line = e.position().map_or(0, |p| p.line());
                anyhow!("{}: line {line}: {e}", self.path.display())
            })?;
            if !more {
                break;
            }
            if self.record.len() != self.width {
                let line = self.record.position().map_or(0, |p| p.line());
                bail!(
                    "{}: line {line}: {} fields, the header has {}",
                    self.path.display(),
                    self.record.len(),
                    self.width
                );
            }
            let mut row = Vec::with_capacity(self.width - 1);
            for (c, cell) in self.record.iter().enumerate() {
                let v = cell_value(cell);
                if c == self.target {
                    ys.push(v);
                } else {
                    row.push(v);
                }
            }
            rows.push(row);
        }
        out.clear();
        if !rows.is_empty() {
            serde_json::to_writer(
                &mut *out,
                &serde_json::json!({"columns": names, "rows": rows, "y": ys}),
            )
            .expect("values serialize");
        }
        Ok(rows.len())
    }
}

/// A CSV cell as JSON: a finite number, null for a missing value, text otherwise.
fn cell_value(cell: &str) -> serde_json::Value {
    let t = cell.trim();
    if ravel_core::data::is_missing(t) {
        return serde_json::Value::Null;
    }
    match t.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
        Some(n) => serde_json::Value::Number(n),
        None => serde_json::Value::String(t.to_string()),
    }
}

/// Runs `ravel produce`.
pub fn run(args: &ProduceArgs) -> anyhow::Result<Produced> {
    if args.batch_rows == 0 {
        bail!("--batch-rows must be at least 1");
    }
    let (mut source, p, names, total) = match (&args.input, &args.synthetic) {
        (Some(path), _) => {
            let format = args.file_format.as_deref().map(|f| match f {
                "csv" => Format::Csv,
                "npy" => Format::Npy,
                _ => Format::Libsvm,
            });
            // Only a message's rows are held; a file whose rows alone pass --max-memory is
            // refused before reading.
            let batch_rows = match args.wire_format {
                WireFormat::JsonNamed
                | WireFormat::Avro
                | WireFormat::Protobuf
                | WireFormat::JsonSchema => 1,
                _ => args.batch_rows,
            };
            let csv = match format {
                Some(f) => f == Format::Csv,
                None => Format::detect(path)? == Format::Csv,
            };
            if csv
                && matches!(
                    args.wire_format,
                    WireFormat::Auto | WireFormat::JsonNamedBatch
                )
            {
                let (cells, names) = Cells::open(path, args.target.as_deref())?;
                (Source::Cells(cells), names.len(), Some(names), None)
            } else {
                let opts = OpenOptions {
                    target: args.target.as_deref(),
                    format,
                    compact_features: false,
                    budget: args.memory.limit().budget(Plan::Rows { batch_rows }),
                    fields: Default::default(),
                };
                let r = RowReader::open(path, &opts)?;
                let (p, names) = (r.p, r.names.clone());
                (Source::File(r), p, names, None)
            }
        }
        (None, Some(spec)) => {
            let spec: SyntheticSpec = spec
                .parse()
                .map_err(|e: String| anyhow!("--synthetic: {e}"))?;
            let n = spec
                .n
                .ok_or_else(|| anyhow!("--synthetic needs n=ROWS (how many rows to send)"))?;
            (Source::Synthetic(spec.rows()), spec.p, None, Some(n))
        }
        (None, None) => bail!("give --input FILE or --synthetic SPEC"),
    };
    let wire = match (args.wire_format, &names) {
        (WireFormat::Auto, Some(_)) => WireFormat::JsonNamedBatch,
        (WireFormat::Auto, None) => WireFormat::Json,
        (w @ (WireFormat::JsonNamed | WireFormat::JsonNamedBatch), None) => bail!(
            "--wire-format {} needs feature names: use a CSV file with a header row",
            if w == WireFormat::JsonNamed {
                "json-named"
            } else {
                "json-named-batch"
            }
        ),
        (w, None) if args.input.is_some() && w.schemad().is_some() => bail!(
            "--wire-format {} needs feature names: use a CSV file with a header row",
            w.schemad().expect("checked").1
        ),
        (w, _) => w,
    };
    let framed = match wire.schemad() {
        Some((kind, flag)) => {
            let Some(url) = &args.schema_registry else {
                bail!(
                    "--wire-format {flag} registers the rows' schema: give --schema-registry URL"
                );
            };
            // The record's fields: the features' names (x0, x1, ... for --synthetic), then the
            // target's (its header name, else y).
            let mut fields = names
                .clone()
                .unwrap_or_else(|| (0..p).map(|j| format!("x{j}")).collect());
            let target = args
                .target
                .as_deref()
                .filter(|t| t.parse::<usize>().is_err())
                .unwrap_or("y");
            fields.push(target.to_string());
            let f = schemad::Framed::register(
                kind,
                url,
                args.schema_registry_auth.as_deref(),
                &args.topic,
                &fields,
            )?;
            if !args.quiet {
                eprintln!(
                    "registered the rows' schema as id {} of subject '{}-value' at {url}",
                    f.id(),
                    args.topic
                );
            }
            Some(f)
        }
        None => None,
    };
    if let (WireFormat::JsonNamedBatch, Some(names), false) = (wire, &names, args.quiet) {
        let shown: Vec<&str> = names.iter().take(8).map(String::as_str).collect();
        eprintln!(
            "sending rows by name, cells as they are (the header's {} feature columns: {}{}); a \
             stream that declares names matches them in any order and maps text and missing \
             cells through its features",
            names.len(),
            shown.join(", "),
            if names.len() > shown.len() {
                ", ..."
            } else {
                ""
            }
        );
    }
    let mut kafka = KafkaConfig::default();
    for kv in &args.options {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| anyhow!("-X {kv}: expected KEY=VALUE"))?;
        kafka
            .options
            .insert(k.trim().to_string(), v.trim().to_string());
    }
    let mut cc = crate::kafka::client_config(&kafka, &args.brokers);
    cc.set("linger.ms", "10");
    let producer: BaseProducer<DeliveryContext> = cc
        .create_with_context(DeliveryContext::default())
        .context("cannot create the Kafka producer")?;

    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total.unwrap_or(0))
    };
    let style = match total {
        Some(_) => ProgressStyle::with_template("{bar:40} {pos}/{len} rows  {per_sec}  eta {eta}"),
        None => ProgressStyle::with_template("{spinner} {pos} rows  {per_sec}  {elapsed}"),
    };
    bar.set_style(style.expect("valid template"));

    let rows_per_message = if framed.is_some() || wire == WireFormat::JsonNamed {
        1
    } else {
        args.batch_rows
    };
    let mut values = Vec::with_capacity(p + 1);
    let (mut x, mut y, mut buf) = (Vec::new(), Vec::new(), Vec::new());
    let mut out = Produced {
        rows: 0,
        messages: 0,
        bytes: 0,
    };
    loop {
        x.clear();
        y.clear();
        let got = match &mut source {
            Source::File(r) => r.next_batch(rows_per_message, &mut x, &mut y)?,
            Source::Synthetic(rows) => rows.fill(rows_per_message, &mut x, &mut y),
            Source::Cells(c) => c.batch(
                names.as_deref().expect("a header"),
                rows_per_message,
                &mut buf,
            )?,
        };
        if got == 0 {
            break;
        }
        match wire {
            _ if matches!(source, Source::Cells(_)) => {}
            WireFormat::Json | WireFormat::Auto => format::encode_json(&x, &y, p, &mut buf),
            WireFormat::JsonNamedBatch => format::encode_json_named_batch(
                names.as_deref().expect("checked"),
                &x,
                &y,
                &mut buf,
            ),
            WireFormat::Binary => format::encode_binary(&x, &y, p, &mut buf),
            WireFormat::Avro | WireFormat::Protobuf | WireFormat::JsonSchema => {
                values.clear();
                values.extend_from_slice(&x);
                values.push(y[0]);
                framed
                    .as_ref()
                    .expect("registered")
                    .encode(&values, &mut buf)?;
            }
            WireFormat::JsonNamed => {
                format::encode_json_named(names.as_deref().expect("checked"), &x, y[0], &mut buf)
            }
        }
        if buf.len() > MAX_MESSAGE_BYTES {
            bail!(
                "a message of {got} rows is {} bytes, over Kafka's default limit of {MAX_MESSAGE_BYTES}: lower --batch",
                buf.len()
            );
        }
        let record = BaseRecord::<(), [u8]>::to(&args.topic).payload(&buf[..]);
        if let Err((e, _)) = crate::kafka::send::send_waiting(&producer, record) {
            bail!("cannot send to topic '{}': {e}", args.topic);
        }
        producer.poll(Duration::ZERO);
        out.rows += got as u64;
        out.messages += 1;
        out.bytes += buf.len() as u64;
        bar.inc(got as u64);
    }
    producer.flush(Duration::from_secs(60)).map_err(|e| {
        anyhow!(
            "not every message was confirmed by {} within 60 s: {e}",
            args.brokers
        )
    })?;
    bar.finish_and_clear();
    let failed = producer.context().failed.load(Ordering::Relaxed);
    if failed > 0 {
        let first = crate::lock(&producer.context().first_error)
            .clone()
            .unwrap_or_default();
        bail!(
            "{failed} of {} messages were not delivered to '{}': {first}",
            out.messages,
            args.topic
        );
    }
    Ok(out)
}
