"""A client for the ravel service's HTTP API (docs/http-api.md; the contract is `/openapi.json`).

`Client(url, token=None)` reaches the streams (`client.streams()`, `client.stream(name)`), their
models, paths and predictions, the declarations of streams made at run time, each stream's
live quality and history, and its running statistics: `client.stream(name).statistics()`
brings them into this process (`ravel_lm.Stats`), where `fit_stats` hands them to any of the
package's estimators, so a notebook runs any model, path or selection on the service's state
and gets the service's own numbers. Answers are typed (`Model`, `Path`, `StreamSummary`, ...:
coefficients as pandas Series); a refusal raises `ApiError` with the API's error code and
message. Only the standard library speaks HTTP here (urllib); pandas shapes the answers.

tests/test_client.py holds every route and schema used here to the served `/openapi.json`.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._model import Model, Path
from ._native import Stats

# Each route the client calls, as (METHOD, the OpenAPI path template): the test holds these to
# the served document, with the schema each answer is read as.
ROUTES = {
    "streams": ("GET", "/v1/streams", "StreamList"),
    "stream": ("GET", "/v1/streams/{name}", "StreamDetail"),
    "declaration": ("GET", "/v1/streams/{name}/declaration", None),
    "declare": ("PUT", "/v1/streams/{name}", None),
    "retire": ("DELETE", "/v1/streams/{name}", None),
    "history": ("GET", "/v1/streams/{name}/history", "StreamHistory"),
    "model": ("POST", "/v1/streams/{name}/model", "StreamModel"),
    "path": ("POST", "/v1/streams/{name}/path", "StreamPath"),
    "predict": ("POST", "/v1/streams/{name}/predict", "PredictResponse"),
    "statistics": ("GET", "/v1/streams/{name}/statistics", "StreamStatistics"),
}

# The fields of the answers the client reads, by schema: the test checks each is in the
# served document's schema.
FIELDS = {
    "StreamList": ["streams"],
    "StreamSummary": [
        "name", "topic", "task", "p", "n", "alpha", "schedule", "drift", "as_of", "quality",
    ],
    "StreamDetail": ["features"],
    "StreamHistory": ["name", "method", "k", "features", "points"],
    "StreamModel": ["as_of", "window"],
    "StreamPath": ["as_of", "window"],
    "PredictResponse": ["predictions", "labels", "model", "as_of"],
    "StreamStatistics": ["name", "task", "features", "n", "as_of", "statistics", "window"],
    "ErrorBody": ["error"],
}


class ApiError(Exception):
    """A request the service refused: the HTTP status, the API's error `code` (the table of
    codes in docs/http-api.md) and its `message`, which says what to do."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


@dataclass
class StreamSummary:
    """A stream as `GET /v1/streams` lists it."""

    name: str
    topic: str
    task: str
    p: int
    n: int
    alpha: float
    schedule: str
    drift: dict[str, Any]
    as_of: int | None
    quality: dict[str, Any] | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, doc):
        return cls(
            name=doc["name"], topic=doc["topic"], task=doc["task"], p=int(doc["p"]),
            n=int(doc["n"]), alpha=float(doc["alpha"]), schedule=doc["schedule"],
            drift=doc["drift"], as_of=doc.get("as_of"), quality=doc.get("quality"), raw=doc,
        )


@dataclass
class Statistics:
    """A stream's running statistics (`GET .../statistics`), in this process."""

    name: str
    task: str
    features: list[str]
    n: int
    as_of: int | None
    stats: Stats
    window: dict[str, Any] | None = None

    def fit(self, estimator):
        """`estimator` (any of ravel_lm's) fitted on these statistics: the service's model
        for the same request, in this process."""
        return estimator.fit_stats(self.stats, self.features)


class StreamClient:
    """One stream of the service: its summary, models, paths, predictions, declaration,
    quality, history and statistics."""

    def __init__(self, client: "Client", name: str):
        self._client = client
        self.name = name

    def _call(self, route, body=None, query=None):
        return self._client._call(route, {"name": self.name}, body, query)

    def summary(self) -> StreamSummary:
        """The stream's summary (`GET /v1/streams/{name}`), with its feature names in `raw`."""
        return StreamSummary.from_json(self._call("stream"))

    def features(self) -> list[str]:
        """The feature names, in the statistics' column order."""
        return list(self._call("stream")["features"])

    def quality(self) -> dict[str, Any] | None:
        """The live prequential quality (None when the stream's quality is off)."""
        return self._call("stream").get("quality")

    def model(self, method: str | None = None, window: dict | None = None, **params) -> Model:
        """`POST .../model`: `method` and its parameters as the API names them (`k`,
        `lambda`, `select`, `inference`, `standardize`, ...), and a `window` of time."""
        body = _request(method, params, window)
        doc = self._call("model", body)
        model = Model.from_json(doc)
        model.raw["as_of"] = doc.get("as_of")
        return model

    def path(self, method: str | None = None, window: dict | None = None, **params) -> Path:
        """`POST .../path`: the whole warm-started path."""
        return Path.from_json(self._call("path", _request(method, params, window)))

    def predict(self, X, method: str | None = None, window: dict | None = None, **params):
        """Predictions for a data frame's rows (columns by feature name; a numpy array: the
        stream's column order) from the model `method` and `params` ask for, as a pandas
        Series (classification: the labels too, in `attrs["labels"]`)."""
        import pandas as pd

        body: dict[str, Any] = {"model": _request(method, params, window)}
        if isinstance(X, pd.DataFrame):
            body["features"] = [
                {str(k): float(v) for k, v in row.items()} for row in X.to_dict("records")
            ]
            index = X.index
        else:
            X = np.asarray(X, dtype=float)
            body["rows"] = X.tolist()
            index = None
        doc = self._call("predict", body)
        out = pd.Series(doc["predictions"], index=index, name="prediction", dtype=float)
        if doc.get("labels") is not None:
            out.attrs["labels"] = doc["labels"]
        out.attrs["model"] = Model.from_json(doc["model"])
        return out

    def history(self):
        """The stream's default model over time, as a pandas DataFrame (one row per point:
        time, n, alpha, effective sample size, alarms, r2, intercept, and a column per
        feature that was ever in the support)."""
        import pandas as pd

        doc = self._call("history")
        names = doc["features"]
        rows = []
        for point in doc["points"]:
            row = {k: point.get(k) for k in (
                "time_ms", "n", "as_of", "alpha", "effective_sample_size", "alarms", "r2",
                "intercept",
            )}
            for j, value in zip(point["support"], point["coefficients"]):
                row[names[j]] = value
            rows.append(row)
        frame = pd.DataFrame(rows)
        if len(frame):
            frame["time"] = pd.to_datetime(frame["time_ms"], unit="ms")
        return frame

    def declaration(self) -> dict[str, Any]:
        """Where the stream's declaration came from and the declaration itself."""
        return self._call("declaration")

    def declare(self, declaration: dict[str, Any]) -> dict[str, Any]:
        """`PUT /v1/streams/{name}`: declares (or replaces) the stream at run time (the
        admin token; docs/declarations.md)."""
        return self._client._call("declare", {"name": self.name}, declaration, admin=True)

    def retire(self) -> dict[str, Any] | None:
        """`DELETE /v1/streams/{name}`: retires a stream declared at run time."""
        return self._client._call("retire", {"name": self.name}, None, admin=True)

    def statistics(self, window: dict | None = None) -> Statistics:
        """The stream's running statistics, read into this process (`Statistics.fit` gives
        any estimator their model). `window` ({"from": T1, "to": T2}, Unix ms or RFC 3339,
        or {"last": "1h"}; a stream that keeps time buckets): the statistics of that span
        alone, as the model routes' `window` merges them (`Statistics.window` says the span
        covered)."""
        query = None
        if window is not None:
            if not isinstance(window, dict):
                raise TypeError('window is a dict: {"from": T1, "to": T2} or {"last": "1h"}')
            query = {f"window.{key}": str(value) for key, value in window.items()}
        doc = self._call("statistics", query=query)
        return Statistics(
            name=doc["name"],
            task=doc["task"],
            features=list(doc["features"]),
            n=int(doc["n"]),
            as_of=doc.get("as_of"),
            stats=Stats.from_json(json.dumps(doc["statistics"])),
            window=doc.get("window"),
        )


def _request(method, params, window):
    body = {} if method is None else {"method": method}
    for key, value in params.items():
        if value is not None:
            body["lambda" if key in ("lam", "lambda_") else key] = value
    if window is not None:
        body["window"] = window
    return body


class Client:
    """The service at `url` (e.g. "http://127.0.0.1:8080"). `token` is the service's
    `http.token` (sent as a bearer token; reads need none), `admin_token` its
    `http.admin_token` for declarations (default: `token`)."""

    def __init__(self, url: str, token: str | None = None, *, admin_token: str | None = None,
                 timeout: float = 60.0):
        self.url = url.rstrip("/")
        self.token = token
        self.admin_token = admin_token if admin_token is not None else token
        self.timeout = timeout

    def _call(self, route, names=None, body=None, query=None, admin=False):
        method, template, _ = ROUTES[route]
        path = template
        for key, value in (names or {}).items():
            path = path.replace("{" + key + "}", urllib.parse.quote(str(value), safe=""))
        url = self.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            req.add_header("content-type", "application/json")
        token = self.admin_token if admin else self.token
        if token:
            req.add_header("authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                text = r.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                err = json.loads(raw)["error"]
                raise ApiError(e.code, err["code"], err["message"]) from None
            except (ValueError, KeyError, TypeError):
                raise ApiError(e.code, "http", raw.decode(errors="replace")[:500]) from None
        return json.loads(text) if text else None

    def streams(self) -> list[StreamSummary]:
        """Every observation stream, in name order."""
        return [StreamSummary.from_json(s) for s in self._call("streams")["streams"]]

    def stream(self, name: str) -> StreamClient:
        """One stream (no request is made until a method is called)."""
        return StreamClient(self, name)

    def openapi(self) -> dict[str, Any]:
        """The served OpenAPI document."""
        with urllib.request.urlopen(self.url + "/openapi.json", timeout=self.timeout) as r:
            return json.loads(r.read())
