"""Produces records with Confluent's own serializers (confluent-kafka's AvroSerializer,
ProtobufSerializer and JSONSerializer) against a Schema Registry, for tests/schema_registry.rs.

Usage: confluent_produce.py PLAN.json, where the plan is
  {"brokers", "topic", "registry", "user", "password", "format": "avro" | "protobuf" | "json",
   "header_id": false, "producer": {more librdkafka settings}, "parts": [{"schema": ...,
   "records": [{...}, ...]}, ...]}
Each part is written with its own schema (a schema change between parts). An Avro or JSON
part's schema is the schema itself; a Protobuf part's is {"name", "fields": [[name, type],
...], "nested": {"Name": [[name, type], ...]}}, built into a FileDescriptorProto here (no
protoc needed), numbered in order; "optional" marks proto3 optional scalars; type "timestamp" is Google's
well-known Timestamp (an import); "imports": {"dir/file.proto": {"package", "messages": {"Name":
[[name, type], ...]}}} are other files, registered by the serializer as references, whose
types a field names fully qualified ("pkg.Name"). An Avro part's "references": {"subject":
schema} are named types registered under their own subjects first, which the part's schema
uses by name.
"""

import json
import sys

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient, header_schema_id_serializer
from confluent_kafka.serialization import MessageField, SerializationContext

SCALARS = {
    "double": 1, "float": 2, "int64": 3, "uint64": 4, "int32": 5, "bool": 8, "string": 9,
}


def proto_class(spec, version):
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FileDescriptorProto()
    fdp.name = f"sale_v{version}.proto"
    fdp.package = f"shop.v{version}"
    fdp.syntax = "proto3"

    def fill(msg, fields, nested_names):
        for number, field in enumerate(fields, start=1):
            name, kind = field[0], field[1]
            f = msg.field.add()
            f.name = name
            f.number = number
            f.label = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
            if kind in SCALARS:
                f.type = SCALARS[kind]
            elif "." in kind:
                # A message type of an imported file, fully qualified.
                f.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
                f.type_name = f".{kind}"
            elif kind == "timestamp":
                # Google's well-known Timestamp: an import the serializer does not register
                # as a reference (skip.known.types).
                f.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
                f.type_name = ".google.protobuf.Timestamp"
                if "google/protobuf/timestamp.proto" not in fdp.dependency:
                    fdp.dependency.append("google/protobuf/timestamp.proto")
            else:
                f.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
                f.type_name = f".shop.v{version}.{spec['name']}.{kind}"
            if len(field) > 2 and field[2] == "optional":
                f.proto3_optional = True
                oneof = len(msg.oneof_decl)
                msg.oneof_decl.add().name = f"_{name}"
                f.oneof_index = oneof

    msg = fdp.message_type.add()
    msg.name = spec["name"]
    for nested_name, nested_fields in spec.get("nested", {}).items():
        nested = msg.nested_type.add()
        nested.name = nested_name
        fill(nested, nested_fields, [])
    fill(msg, spec["fields"], list(spec.get("nested", {})))
    from google.protobuf import timestamp_pb2

    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    for file_name, spec_import in spec.get("imports", {}).items():
        imported = descriptor_pb2.FileDescriptorProto()
        imported.name = file_name
        imported.package = spec_import["package"]
        imported.syntax = "proto3"
        for message_name, message_fields in spec_import["messages"].items():
            m = imported.message_type.add()
            m.name = message_name
            fill(m, message_fields, [])
        pool.Add(imported)
        fdp.dependency.append(file_name)
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"shop.v{version}.{spec['name']}"))


def main():
    plan = json.load(open(sys.argv[1]))
    conf = {"url": plan["registry"]}
    if plan.get("user"):
        conf["basic.auth.user.info"] = f"{plan['user']}:{plan['password']}"
    client = SchemaRegistryClient(conf)
    producer = Producer({"bootstrap.servers": plan["brokers"], "linger.ms": 5, **plan.get("producer", {})})
    ser_conf = {"auto.register.schemas": True}
    if plan.get("header_id"):
        ser_conf["schema.id.serializer"] = header_schema_id_serializer
    fmt, topic = plan["format"], plan["topic"]
    key = 0
    for version, part in enumerate(plan["parts"]):
        if fmt == "avro":
            from confluent_kafka.schema_registry.avro import AvroSerializer

            from confluent_kafka.schema_registry import Schema, SchemaReference

            # Named types of other subjects: registered first, then named by the schema's
            # references (the serializer reads them back by subject and version).
            refs = []
            for subject, named in part.get("references", {}).items():
                registered = Schema(json.dumps(named), "AVRO")
                client.register_schema(subject, registered)
                version = client.lookup_schema(subject, registered).version
                refs.append(SchemaReference(subject, subject, version))
            ser = AvroSerializer(client, Schema(json.dumps(part["schema"]), "AVRO", refs), conf=ser_conf)
            make = lambda r: r
        elif fmt == "json":
            from confluent_kafka.schema_registry.json_schema import JSONSerializer

            ser = JSONSerializer(json.dumps(part["schema"]), client, conf=ser_conf)
            make = lambda r: r
        elif fmt == "protobuf":
            from google.protobuf import json_format
            from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

            cls = proto_class(part["schema"], version)
            ser = ProtobufSerializer(cls, client, conf={**ser_conf, "use.deprecated.format": False})
            make = lambda r, cls=cls: json_format.ParseDict(r, cls())
        else:
            raise SystemExit(f"unknown format {fmt}")
        for record in part["records"]:
            headers = []
            ctx = SerializationContext(topic, MessageField.VALUE, headers)
            value = ser(make(record), ctx)
            producer.produce(topic, value=value, key=str(key).encode(), headers=headers or None)
            key += 1
            producer.poll(0)
    left = producer.flush(60)
    if left:
        raise SystemExit(f"{left} messages not delivered")


if __name__ == "__main__":
    main()
