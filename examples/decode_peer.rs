//! The standalone decoder of the decode-cost benchmark (`scripts/bench_decode.py`, issue 32):
//! what a program that only decodes the service's messages costs per row, with the usual crate
//! of each format and no Kafka, no fold. It reads the same payloads the benchmark produced (a
//! file of messages, each a little-endian u32 length then the bytes), decodes every message
//! `--repeat` times and prints one JSON line: rows decoded and seconds. The script measures the
//! whole process's CPU.
//!
//! - `json`: ravel's mini-batches `{"rows": [[...]], "y": [...]}` into typed vectors (serde_json).
//! - `binary`: the `RVB1` header and the little-endian f64s into a vector.
//! - `avro`: Confluent-framed Avro datums into `apache_avro::types::Value` (the writer's schema
//!   from `--schema FILE`, its JSON), by one `GenericDatumReader` of that schema.
//! - `protobuf`: Confluent-framed Protobuf (message-index list skipped) into a
//!   `prost_reflect::DynamicMessage` of `--message NAME` in the file of `--schema FILE` (the
//!   base64 `FileDescriptorProto` Confluent's serializer registers).
//!
//! `cargo run --release --example decode_peer -- --format avro --payloads F --schema S --repeat 5`

#[path = "common/args.rs"]
mod args;
use anyhow::{Context, bail};
use base64::Engine;
use prost_reflect::prost::Message as _;
use prost_reflect::{DescriptorPool, DynamicMessage};
use std::time::Instant;

#[derive(serde::Deserialize)]
#[allow(dead_code)] // decoded to be paid for, never read
struct Batch {
    rows: Vec<Vec<f64>>,
    y: Vec<f64>,
}

/// Skips a zigzag varint of Confluent's message-index list.
fn varint(bytes: &mut &[u8]) -> anyhow::Result<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = bytes
            .split_first()
            .context("a truncated message-index list")?;
        *bytes = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    bail!("a varint longer than 10 bytes")
}

fn main() -> anyhow::Result<()> {
    let format = args::required("--format")?;
    let format = format.as_str();
    let file = std::fs::read(args::required("--payloads")?)?;
    let repeat: usize = args::optional("--repeat")
        .as_deref()
        .unwrap_or("1")
        .parse()?;
    let mut payloads = Vec::new();
    let mut rest = file.as_slice();
    while !rest.is_empty() {
        let len = u32::from_le_bytes(rest[..4].try_into()?) as usize;
        payloads.push(&rest[4..4 + len]);
        rest = &rest[4 + len..];
    }
    let schema_text =
        || -> anyhow::Result<String> { Ok(std::fs::read_to_string(args::required("--schema")?)?) };
    let start = Instant::now();
    let mut rows = 0usize;
    match format {
        "json" => {
            for _ in 0..repeat {
                for p in &payloads {
                    let b: Batch = serde_json::from_slice(p)?;
                    rows += b.rows.len();
                }
            }
        }
        "binary" => {
            for _ in 0..repeat {
                for p in &payloads {
                    let n = u32::from_le_bytes(p[4..8].try_into()?) as usize;
                    let values: Vec<f64> = p[12..]
                        .chunks_exact(8)
                        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                        .collect();
                    std::hint::black_box(values);
                    rows += n;
                }
            }
        }
        "avro" => {
            let schema = apache_avro::Schema::parse_str(&schema_text()?)?;
            let reader =
                apache_avro::reader::datum::GenericDatumReader::builder(&schema).build()?;
            for _ in 0..repeat {
                for p in &payloads {
                    let v = reader.read_value(&mut &p[5..])?;
                    std::hint::black_box(v);
                    rows += 1;
                }
            }
        }
        "protobuf" => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(schema_text()?.trim())?;
            let fdp = prost_reflect::prost_types::FileDescriptorProto::decode(bytes.as_slice())?;
            let mut pool = DescriptorPool::new();
            pool.add_file_descriptor_proto(fdp)?;
            let name = args::required("--message")?;
            let desc = pool
                .get_message_by_name(&name)
                .with_context(|| format!("no message {name} in the schema"))?;
            for _ in 0..repeat {
                for p in &payloads {
                    let mut body = &p[5..];
                    // Zigzag: the count n is written as 2n; 0 alone means [0].
                    let count = varint(&mut body)? >> 1;
                    for _ in 0..count {
                        varint(&mut body)?;
                    }
                    let m = DynamicMessage::decode(desc.clone(), body)?;
                    std::hint::black_box(m);
                    rows += 1;
                }
            }
        }
        other => bail!("unknown --format {other}: json, binary, avro or protobuf"),
    }
    let seconds = start.elapsed().as_secs_f64();
    println!("{{\"rows\": {rows}, \"seconds\": {seconds}}}");
    Ok(())
}
