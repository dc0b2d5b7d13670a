"""The client against a live service: `ravel broker` and `ravel serve` (the binary cargo built
in the workspace's target dir, or SERVICE_BIN: no RAVEL_ variable, which the service would
read as configuration), rows sent with `ravel produce`. Every route and
schema the client uses is held to the served /openapi.json; the client's models are the
service's; a stream's statistics in an in-process Lasso give the service's own Lasso path."""

import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sklearn.linear_model as sk

import ravel_lm
from ravel_lm import ApiError, Client, Lasso
from ravel_lm.client import FIELDS, ROUTES

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("SERVICE_BIN", ROOT / "target" / "debug" / "ravel"))
# The processes started here get no RAVEL_ variable: the service takes them as config keys.
ENV = {k: v for k, v in os.environ.items() if not k.startswith("RAVEL_")}
TOKEN, ADMIN = "reader-writer-token-0123456789", "admin-token-0123456789abcdef"
N, NAMES = 400, ["a", "b", "c", "d"]


def rows(n=N, seed=5):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)) * [1.0, 2.0, 0.5, 3.0] + [5.0, -1.0, 0.0, 2.0]
    y = 2.0 + x @ [1.0, -0.5, 0.0, 0.25] + 0.1 * rng.standard_normal(n)
    return x, y


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    assert BIN.exists(), (
        f"{BIN} is missing: build the service first (cargo build, or cargo test --no-run), "
        "or point SERVICE_BIN at a ravel binary"
    )
    tmp = tmp_path_factory.mktemp("service")
    procs = []
    try:
        broker = subprocess.Popen(
            [str(BIN), "broker", "--topic", "sales:1", "--topic", "sales.dlq:1",
             "--topic", "spare:1", "--topic", "spare.dlq:1"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ENV,
        )
        procs.append(broker)
        brokers = broker.stdout.readline().strip()
        assert brokers, "ravel broker printed no address"
        x, y = rows()
        csv = tmp / "rows.csv"
        pd.DataFrame(np.column_stack([x, y]), columns=NAMES + ["y"]).to_csv(csv, index=False)
        subprocess.run(
            [str(BIN), "produce", "--brokers", brokers, "--topic", "sales", "--input", str(csv),
             "--target", "y", "--quiet"],
            check=True, capture_output=True, env=ENV,
        )
        port = free_port()
        config = tmp / "ravel.toml"
        config.write_text(
            f"""
[http]
addr = "127.0.0.1:{port}"
token = "{TOKEN}"
admin_token = "{ADMIN}"

[kafka]
brokers = "{brokers}"

[state]
dir = "{tmp / 'state'}"

[history]
interval_ms = 100

[[streams]]
name = "sales"
topic = "sales"
target = "y"
features = {json.dumps(NAMES)}
quality = {{ every_rows = 100, window_rows = 100 }}
windows = {{ bucket = "1m", keep = "7d" }}
"""
        )
        serve = subprocess.Popen(
            [str(BIN), "serve", "--config", str(config)], cwd=tmp,
            stdout=open(tmp / "serve.log", "w"), stderr=subprocess.STDOUT, env=ENV,
        )
        procs.append(serve)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert serve.poll() is None, (tmp / "serve.log").read_text()
            try:
                with urllib.request.urlopen(url + "/v1/streams/sales", timeout=2) as r:
                    if json.loads(r.read())["n"] == N:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, (tmp / "serve.log").read_text()
            time.sleep(0.1)
        yield url, x, y
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def raw_post(url, path, body):
    req = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), method="POST",
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def schema_properties(doc, schema):
    """Every property name a schema (with its $ref, allOf, oneOf parts) can hold."""
    if "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    props = set(schema.get("properties", {}))
    for key in ("allOf", "oneOf", "anyOf"):
        for part in schema.get(key, []):
            props |= schema_properties(doc, part)
    return props


def test_every_route_and_schema_the_client_uses_is_in_the_served_document(service):
    url, _, _ = service
    doc = Client(url).openapi()
    for name, (method, template, schema) in ROUTES.items():
        assert template in doc["paths"], f"{name}: {template} is not in /openapi.json"
        op = doc["paths"][template].get(method.lower())
        assert op is not None, f"{name}: {method} {template} is not in /openapi.json"
        if schema is not None:
            answer = op["responses"]["200"]["content"]["application/json"]["schema"]
            assert answer == {"$ref": f"#/components/schemas/{schema}"}, (name, answer)
    for schema, fields in FIELDS.items():
        assert schema in doc["components"]["schemas"], schema
        have = schema_properties(doc, {"$ref": f"#/components/schemas/{schema}"})
        missing = set(fields) - have
        assert not missing, f"{schema} has no {missing}"


def test_models_are_the_services_and_equal_least_squares(service):
    url, x, y = service
    client = Client(url, token=TOKEN)
    [summary] = client.streams()
    assert (summary.name, summary.n, summary.p, summary.task) == ("sales", N, 4, "regression")
    stream = client.stream("sales")
    assert stream.features() == NAMES
    model = stream.model("ols")
    raw = raw_post(url, "/v1/streams/sales/model", {"method": "ols"})
    assert model.intercept == raw["intercept"]
    assert model.coefficients.to_dict() == {c["feature"]: c["value"] for c in raw["coefficients"]}
    ref = sk.LinearRegression().fit(x, y)
    assert np.max(np.abs(model.coef(4) - ref.coef_)) < 1e-9
    lasso = stream.model("lasso", k=2)
    assert list(lasso.coefficients.index) == ["a", "b"]
    assert "a" in lasso.summary()
    chosen = stream.model("lasso", select="ebic")
    assert chosen.selection is not None


def test_predictions_from_a_data_frame(service):
    url, x, _ = service
    frame = pd.DataFrame(x[:5], columns=NAMES, index=list("vwxyz"))
    got = Client(url).stream("sales").predict(frame, "lasso", k=3)
    model = got.attrs["model"]
    assert list(got.index) == list("vwxyz")
    assert np.allclose(got.to_numpy(), model.intercept + x[:5] @ model.coef(4), atol=1e-12)


def test_statistics_into_an_estimator_give_the_services_lasso_path(service):
    url, x, y = service
    stream = Client(url).stream("sales")
    stats = stream.statistics()
    assert (stats.n, stats.features, stats.task) == (N, NAMES, "regression")
    local = stats.fit(Lasso(lam=0.05))
    served = stream.model("lasso", **{"lambda": 0.05})
    assert np.array_equal(local.coef_, served.coef(4))
    assert local.intercept_ == served.intercept
    path = local.path()
    service_path = stream.path("lasso")
    assert len(path) == len(service_path) > 10
    assert np.array_equal(path.lambdas, service_path.lambdas)
    assert np.array_equal(path.coefs(4), service_path.coefs(4))
    # And the same statistics as this process folds from the rows sent.
    mine = ravel_lm.OLS().fit(x, y).stats_
    assert np.allclose(mine.covariance(), stats.stats.covariance(), rtol=1e-12, atol=1e-12)


def test_statistics_of_a_window_give_the_services_windowed_model(service):
    url, x, y = service
    stream = Client(url).stream("sales")
    # `ravel produce` stamped every row now: the last day holds them all, and the statistics
    # of that window give the service's model of the same window.
    window = {"last": "1d"}
    stats = stream.statistics(window=window)
    assert stats.n == N and stats.window["n"] == N and stats.window["buckets"] >= 1
    assert stats.stats.n == N
    local = stats.fit(Lasso(lam=0.05))
    served = stream.model("lasso", window=window, **{"lambda": 0.05})
    assert served.raw["window"]["n"] == N
    assert np.array_equal(local.coef_, served.coef(4))
    assert local.intercept_ == served.intercept
    # An explicit span, in RFC 3339 and in Unix ms alike.
    span = {"from": stats.window["from"], "to": stats.window["to"]}
    again = stream.statistics(window=span)
    assert again.n == N and again.stats == stats.stats
    assert stream.statistics(window={"from": stats.window["from_time"], "to": span["to"]}).n == N
    # A window with no rows (the first hour of that day, before any row), one older than the
    # buckets kept, and a malformed one, are refused with the API's codes.
    with pytest.raises(ApiError) as e:
        stream.statistics(window={"from": span["from"], "to": span["from"] + 3_600_000})
    assert (e.value.status, e.value.code) == (409, "no_data")
    assert "holds no rows" in e.value.message
    with pytest.raises(ApiError) as e:
        stream.statistics(window={"from": 0, "to": 60_000})
    assert (e.value.status, e.value.code) == (400, "invalid_window")
    assert "oldest kept bucket" in e.value.message
    with pytest.raises(ApiError) as e:
        stream.statistics(window={"from": 0})
    assert (e.value.status, e.value.code) == (400, "invalid_window")
    # Without a window: the whole stream, and no window in the answer.
    assert stream.statistics().window is None


def test_errors_carry_the_api_code_and_message(service):
    url, _, _ = service
    client = Client(url, token=TOKEN)
    with pytest.raises(ApiError) as e:
        client.stream("nope").model("ols")
    assert (e.value.status, e.value.code) == (404, "unknown_stream")
    assert "nope" in e.value.message
    with pytest.raises(ApiError) as e:
        client.stream("sales").model("lasso", k=9)
    assert (e.value.status, e.value.code) == (400, "k_too_large")
    with pytest.raises(ApiError) as e:
        Client(url).stream("spare").declare({"topic": "spare", "features": 2})
    assert e.value.status == 401


def test_declarations_quality_and_history(service):
    url, _, _ = service
    client = Client(url, token=TOKEN, admin_token=ADMIN)
    spare = client.stream("spare")
    made = spare.declare({"topic": "spare", "features": ["u", "v"], "target": "w"})
    assert made["origin"] == "api"
    assert spare.declaration()["origin"] == "api"
    assert "spare" in [s.name for s in client.streams()]
    spare.retire()
    assert "spare" not in [s.name for s in client.streams()]
    quality = client.stream("sales").quality()
    assert quality is not None and quality["rows"] > 0
    deadline = time.monotonic() + 10
    while (history := client.stream("sales").history()).empty:
        assert time.monotonic() < deadline, "no history point"
        time.sleep(0.2)
    assert history["n"].iloc[-1] == N
