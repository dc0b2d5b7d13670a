#!/usr/bin/env python3
"""Decode cost per row for every message format (issue 32): CPU seconds per million rows of

- the whole `ravel serve` process (user + system, from /proc; decoding, the fold and
  everything else the service does, from its start until every row is in the statistics),
- a bare rdkafka consumer process reading the same topic with the service's client settings
  and only counting (`examples/bare_consumer.rs`: what Kafka alone costs a consumer), and
- a standalone decoder process decoding the same payloads from a file with the usual crate of
  the format and nothing else (`examples/decode_peer.rs`: serde_json into typed vectors,
  apache-avro into its Value, prost-reflect into a DynamicMessage),

in interleaved rounds (ravel, ravel with live quality off, consumer, decoder, ravel, ...),
medians; the column "quality" is what the stream's live prequential quality (on by default,
issue 33) adds to ravel's CPU per row. Formats: ravel's binary
and JSON mini-batches (100 rows a message at p = 100, 10 at p = 1000, as scripts/bench_all.py)
and Confluent-framed Avro and Protobuf records (one row a message, fields x0..x{p-1} and y),
written by Confluent's own serializers (confluent-kafka's AvroSerializer, ProtobufSerializer)
against a Schema Registry this script serves on localhost (register and schema by id: the
calls the serializers and the service make). Each topic has 128 partitions (the embedded
broker keeps 5 MB a partition). On a 2-core machine the broker, the consumer and this
script share the cores: CPU seconds of each process, not rates, are the measure.

`--scoring` measures a scorer instead (issue 33): events read, predicted and written as one
prediction each (`[[scorers]]`, at least once) against a bare consume-and-produce pipe with
the scorer's client settings and batching (`examples/bare_pipe.rs`), CPU seconds per million
events of each process: 50,000 JSON events `{"x": [...]}` at p = 100 on 32 partitions, the
stream's model from 20,000 rows (folded in the same ravel run).

Run: scripts/test sets up target/pyenv (confluent-kafka with Avro and Protobuf, numpy), then
     cargo build --release --bin ravel --example bare_consumer --example decode_peer \
         --example bare_pipe
     target/pyenv/bin/python scripts/bench_decode.py [--rounds 3] [--cases avro100,json1000,...]
         [--scoring] [--before OTHER_RAVEL] [--poll-ms 50]
Prints the table (Markdown) on stdout, progress on stderr. `--before` runs another build of
ravel in the same rounds (alternating: before/after, then after/before) for a comparison on a
shared machine. The service is asked for its rows (`GET /v1/streams`) every `--poll-ms` (50;
it was 5 ms, and answering took 3-8% of the service's CPU on binary mini-batches).
"""

import argparse
import base64
import json
import os
import resource
import statistics
import struct
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "python"))
import bench_all as B  # noqa: E402
from bench_freshness import Procs, cpu_seconds, start_broker, start_serve  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARTITIONS = 128
# format, p, rows per message, messages
CASES = {
    "binary100": ("binary", 100, 100, 5_000),
    "json100": ("json", 100, 100, 3_000),
    "avro100": ("avro", 100, 1, 200_000),
    "protobuf100": ("protobuf", 100, 1, 200_000),
    "binary1000": ("binary", 1000, 10, 5_000),
    "json1000": ("json", 1000, 10, 3_000),
    "avro1000": ("avro", 1000, 1, 20_000),
    "protobuf1000": ("protobuf", 1000, 1, 20_000),
}
DISTINCT = 2_000  # distinct records of a schema'd case, produced in turn


class Registry:
    """The Schema Registry calls the serializers and the service make: register a subject's
    schema (`POST /subjects/S/versions`, the same schema keeps its id), a schema by id and the
    schema types."""

    def __init__(self):
        self.schemas = []  # (type, text)
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_):
                pass

            def reply(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                if "/versions" not in self.path:
                    return self.reply(404, {"error_code": 40401, "message": "Subject not found"})
                key = (body.get("schemaType", "AVRO"), body["schema"])
                if key not in registry.schemas:
                    registry.schemas.append(key)
                self.reply(200, {"id": registry.schemas.index(key) + 1})

            def do_GET(self):
                path = self.path.split("?")[0]
                if path == "/schemas/types":
                    return self.reply(200, ["AVRO", "PROTOBUF", "JSON"])
                if path == "/subjects":
                    # What ravel asks first: a registry answers it with its subjects.
                    return self.reply(200, [])
                if path.startswith("/schemas/ids/"):
                    i = int(path.rsplit("/", 1)[1]) - 1
                    if 0 <= i < len(registry.schemas):
                        kind, text = registry.schemas[i]
                        body = {"schema": text}
                        if kind != "AVRO":
                            body["schemaType"] = kind
                        return self.reply(200, body)
                self.reply(404, {"error_code": 40403, "message": "Schema not found"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


def schemad_payloads(fmt, p, registry, workdir):
    """DISTINCT Confluent-framed records of x0..x{p-1}, y and what the decoder needs to read
    them (the schema file and the message name)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.serialization import MessageField, SerializationContext

    rng = np.random.default_rng(5)
    x = rng.standard_normal((DISTINCT, p))
    y = x[:, :10] @ np.arange(1, 11) + rng.standard_normal(DISTINCT)
    names = [f"x{j}" for j in range(p)] + ["y"]
    records = [dict(zip(names, map(float, list(row) + [t]))) for row, t in zip(x, y)]
    client = SchemaRegistryClient({"url": registry.url})
    ctx = SerializationContext("bench.tput", MessageField.VALUE)
    conf = {"auto.register.schemas": True}
    schema_file = os.path.join(workdir, f"{fmt}{p}.schema")
    message = ""
    if fmt == "avro":
        from confluent_kafka.schema_registry.avro import AvroSerializer

        schema = {"type": "record", "name": "Row", "fields": [{"name": n, "type": "double"} for n in names]}
        ser = AvroSerializer(client, json.dumps(schema), conf=conf)
        out = [ser(r, ctx) for r in records]
        with open(schema_file, "w") as f:
            json.dump(schema, f)
    else:
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
        from confluent_produce import proto_class
        from google.protobuf import json_format

        cls = proto_class({"name": "Row", "fields": [[n, "double"] for n in names]}, 0)
        ser = ProtobufSerializer(cls, client, conf={**conf, "use.deprecated.format": False})
        out = [ser(json_format.ParseDict(r, cls()), ctx) for r in records]
        with open(schema_file, "w") as f:
            f.write(base64.b64encode(cls.DESCRIPTOR.file.serialized_pb).decode())
        message = cls.DESCRIPTOR.full_name
    return out, schema_file, message


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_case(args, name, workdir, registry):
    fmt, p, per, count = CASES[name]
    total = per * count
    if fmt in ("binary", "json"):
        msgs = B.messages(p, per, fmt)
        schema_file, message = None, ""
        stream = f"features = {p}\n"
    else:
        msgs, schema_file, message = schemad_payloads(fmt, p, registry, workdir)
        names = ", ".join(f'"x{j}"' for j in range(p))
        stream = f'format = "{fmt}"\ntarget = "y"\nfeatures = [{names}]\n'
    sections = f'[schema_registry]\nurl = "{registry.url}"\n\n'
    payloads = os.path.join(workdir, f"{name}.payloads")
    with open(payloads, "wb") as f:
        for m in msgs:
            f.write(struct.pack("<I", len(m)) + m)
    repeat = count // len(msgs)
    decoded_rows = repeat * len(msgs) * per
    procs = Procs()
    cells = {"ravel": [], "ravel_q_off": [], "bare": [], "decoder": [], "before": [], "before_q_off": []}
    # The binaries measured in a round: this build and, with --before, the other one, in
    # alternating order from round to round.
    builds = [("ravel", args.ravel)] + ([("before", args.before)] if args.before else [])
    poll_s = args.poll_ms / 1000
    with open(os.path.join(workdir, "log"), "a") as logf:
        try:
            _, bootstrap = start_broker(procs, args.ravel, [f"bench.tput:{PARTITIONS}", "bench.tput.dlq:1"], logf)
            mb = sum(len(m) for m in msgs) / len(msgs) * count / 1e6
            B.log(f"{name}: filling {count} messages ({mb:.0f} MB)")
            B.fill(bootstrap, "bench.tput", PARTITIONS, msgs, count)
            for k in range(args.rounds):
                B.log(f"{name}: round {k + 1}")
                for label, binary in builds if k % 2 == 0 else builds[::-1]:
                    _, _, cpu = B.serve_once(binary, bootstrap, p, total, workdir, logf, f"r{k}{label}-{name}",
                                             stream_toml=stream, sections=sections, poll_s=poll_s)
                    cells[label].append(cpu / total * 1e6)
                for label, binary in builds if k % 2 == 0 else builds[::-1]:
                    _, _, cpu = B.serve_once(binary, bootstrap, p, total, workdir, logf, f"q{k}{label}-{name}",
                                             stream_toml=stream + "quality = { enabled = false }\n",
                                             sections=sections, poll_s=poll_s)
                    cells[f"{label}_q_off" if label == "before" else "ravel_q_off"].append(cpu / total * 1e6)
                c0 = children_cpu()
                _, out = B.timed([args.bare, "--brokers", bootstrap, "--topic", "bench.tput", "--messages", str(count)])
                cells["bare"].append((children_cpu() - c0) / total * 1e6)
                c0 = children_cpu()
                cmd = [args.decoder, "--format", fmt, "--payloads", payloads, "--repeat", str(repeat)]
                if schema_file:
                    cmd += ["--schema", schema_file]
                if message:
                    cmd += ["--message", message]
                _, out = B.timed(cmd)
                if json.loads(out)["rows"] != decoded_rows:
                    sys.exit(f"the decoder read {out} rows, not {decoded_rows}")
                cells["decoder"].append((children_cpu() - c0) / decoded_rows * 1e6)
        finally:
            procs.stop_all()
    med = {k: statistics.median(v) if v else float("nan") for k, v in cells.items()}
    return (fmt, p, per, total, mb, med)


def scored(api):
    """Predictions written and acknowledged, from /metrics."""
    status, body = api.get("/metrics")
    for line in body.decode().splitlines() if status == 200 else []:
        if line.startswith('ravel_scorer_messages_total{scorer="bench"}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def score_once(ravel, bootstrap, events, workdir, logf, k):
    """CPU seconds of `ravel serve` (stream + scorer) until every event is scored."""
    cfg = os.path.join(workdir, f"score{k}.toml")
    with open(cfg, "w") as f:
        f.write(f'[http]\naddr = "127.0.0.1:0"\n\n[kafka]\nbrokers = "{bootstrap}"\ngroup_id = "sc{k}"\n')
        f.write(f'[state]\ndir = "{tempfile.mkdtemp(dir=workdir)}"\n\n[demo]\nenabled = false\n\n')
        f.write('[[streams]]\nname = "rows"\ntopic = "bench.rows"\nfeatures = 100\n\n')
        f.write('[[scorers]]\nname = "bench"\nstream = "rows"\ntopic = "bench.events"\n')
        f.write(f'output_topic = "bench.pred{k}"\nmodel = {{ method = "lasso", k = 10 }}\n')
    procs = Procs()
    try:
        proc, api = start_serve(procs, ravel, cfg, logf)
        deadline = time.monotonic() + 600
        while scored(api) < events:
            if time.monotonic() > deadline:
                sys.exit(f"only {scored(api)} of {events} events scored (log: {logf.name})")
            time.sleep(0.02)
        return cpu_seconds(proc)
    finally:
        procs.stop_all()


def bench_scoring(args, workdir):
    events, partitions = 50_000, 32
    rng = np.random.default_rng(7)
    x = np.round(rng.standard_normal((2_000, 100)), 4)
    payloads = [json.dumps({"x": row.tolist()}).encode() for row in x]
    procs = Procs()
    cells = {"ravel": [], "pipe": []}
    with open(os.path.join(workdir, "log"), "a") as logf:
        try:
            outputs = [f"bench.pred{k}:{partitions}" for k in range(args.rounds)]
            _, bootstrap = start_broker(procs, args.ravel, ["bench.rows:1", "bench.rows.dlq:1", "bench.events.dlq:1",
                                                            f"bench.events:{partitions}", f"bench.pipe:{partitions}"]
                                        + outputs, logf)
            B.log(f"scoring: filling 20000 rows and {events} events")
            B.fill(bootstrap, "bench.rows", 1, B.messages(100, 100, "binary"), 200)
            B.fill(bootstrap, "bench.events", partitions, payloads, events)
            for k in range(args.rounds):
                B.log(f"scoring: round {k + 1}")
                cells["ravel"].append(score_once(args.ravel, bootstrap, events, workdir, logf, k) / events * 1e6)
                c0 = children_cpu()
                B.timed([args.pipe, "--brokers", bootstrap, "--topic", "bench.events", "--output-topic", "bench.pipe",
                         "--messages", str(events)])
                cells["pipe"].append((children_cpu() - c0) / events * 1e6)
        finally:
            procs.stop_all()
    m = {k: statistics.median(v) for k, v in cells.items()}
    print(f"CPU seconds per million events, medians of {args.rounds} interleaved rounds; load average "
          f"{' / '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs\n")
    print("| job | ravel serve (stream + scorer) | bare consume-and-produce pipe | ravel / pipe |")
    print("|---|---|---|---|")
    print(f"| {events:,} JSON events at p = 100, lasso k = 10, one prediction each | {m['ravel']:.1f} | "
          f"{m['pipe']:.1f} | {m['ravel'] / m['pipe']:.2f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cases", default=",".join(CASES), help=f"some of {', '.join(CASES)}")
    ap.add_argument("--ravel", default=os.path.join(ROOT, "target", "release", "ravel"))
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "ravel-bench-decode"))
    ap.add_argument("--scoring", action="store_true", help="measure a scorer against a bare pipe instead")
    ap.add_argument("--before", help="another ravel binary (an earlier build) run in the same rounds, "
                    "alternating with --ravel")
    ap.add_argument("--poll-ms", type=float, default=50,
                    help="how often the rows in the statistics are asked for (GET /v1/streams); "
                    "the service's CPU includes the answers")
    args = ap.parse_args()
    args.ravel = os.path.abspath(args.ravel)
    if args.before:
        args.before = os.path.abspath(args.before)
        if not os.path.exists(args.before):
            sys.exit(f"--before {args.before} is missing")
    examples = os.path.join(os.path.dirname(args.ravel), "examples")
    args.bare, args.decoder = os.path.join(examples, "bare_consumer"), os.path.join(examples, "decode_peer")
    args.pipe = os.path.join(examples, "bare_pipe")
    for path in (args.ravel, args.bare, args.decoder, args.pipe):
        if not os.path.exists(path):
            sys.exit(f"{path} is missing: cargo build --release --bin ravel --example bare_consumer "
                     "--example decode_peer --example bare_pipe")
    os.makedirs(args.dir, exist_ok=True)
    workdir = tempfile.mkdtemp(dir=args.dir)
    if args.scoring:
        return bench_scoring(args, workdir)
    registry = Registry()
    results = []
    for name in args.cases.split(","):
        if name not in CASES:
            sys.exit(f"unknown case {name}: {', '.join(CASES)}")
        results.append(run_case(args, name, workdir, registry))
    print(f"CPU seconds per million rows, medians of {args.rounds} interleaved rounds; load average "
          f"{' / '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs; rows polled "
          f"every {args.poll_ms:g} ms\n")
    if args.before:
        print(f"--before {args.before} against {args.ravel}, alternating in each round:\n")
        print("| format | p | rows/message | ravel serve: before | after | quality off: before | after | "
              "bare consumer | ravel / bare: before | after |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for fmt, p, per, total, mb, m in results:
            print(f"| {fmt} | {p} | {per} | {m['before']:.2f} | {m['ravel']:.2f} | {m['before_q_off']:.2f} | "
                  f"{m['ravel_q_off']:.2f} | {m['bare']:.2f} | {m['before'] / m['bare']:.2f} | "
                  f"{m['ravel'] / m['bare']:.2f} |")
        print()
    print("| format | p | rows/message | rows | ravel serve (decode + fold + all) | quality off | "
          "quality | bare consumer (Kafka only) | ravel / bare | standalone decoder (decode only) | "
          "ravel / decoder |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for fmt, p, per, total, mb, m in results:
        quality = (m["ravel"] - m["ravel_q_off"]) / m["ravel_q_off"] * 100
        print(f"| {fmt} | {p} | {per} | {total:,} ({mb:.0f} MB) | {m['ravel']:.2f} | {m['ravel_q_off']:.2f} | "
              f"{quality:+.1f}% | {m['bare']:.2f} | {m['ravel'] / m['bare']:.2f} | {m['decoder']:.2f} | "
              f"{m['ravel'] / m['decoder']:.2f} |")


if __name__ == "__main__":
    main()
