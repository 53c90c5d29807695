"""Outages of the services a run needs: the Iceberg catalog, the object store and the Kafka broker.

A run that loses one of them does not stop at the first failed call. It waits with exponential
backoff and starts again from the last commit, which is what a restart of the job would do (the
exactly-once path every restart takes), up to ``outage_retry.num_retries`` times in a row
without a committed batch in between. Then it fails with :class:`ServiceUnavailableError`, which
names the service, its endpoint, the last error, the settings and what to do.

Only connection-level failures of a known service count as outages (refused or reset
connections, timeouts, HTTP 503, Kafka transport errors). Anything else, an authorization
failure or a missing table for instance, fails the run at once, as before.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from kafka_iceberg.checks.error_topic import ErrorTopicError
from kafka_iceberg.errors import KafkaIcebergError, ServiceUnavailableError, error_chain, messages, short_message

CATALOG, OBJECT_STORE, BROKER = "catalog", "object store", "Kafka broker"
_JITTER = 0.1  # up to +10 % on each wait, like commit retries

# Connection-level failures, as the JVM clients (Iceberg's HTTP client, the AWS SDKs, Hadoop S3A,
# Kafka's Java client) and librdkafka word them.
_CONNECTIVITY = re.compile(
    r"Connection refused|ConnectException|HttpHostConnectException|NoHttpResponseException|"
    r"SocketTimeoutException|ConnectTimeoutException|connect timed out|Read timed out|Connection reset|"
    r"Broken pipe|No route to host|Unable to execute HTTP request|ServiceUnavailable|Service Unavailable|"
    r"\bSlowDown\b|Remote host terminated the handshake|"
    # pyarrow's S3 filesystem (the Arrow writer's tasks): the AWS SDK for C++ over curl
    r"AWS Error NETWORK_CONNECTION|Could(?: not|n't) connect to server|curlCode: 28|"
    # ... and the store's own transient answers, once pyarrow's few retries are spent
    r"AWS Error (?:INTERNAL_FAILURE|SLOW_DOWN|SERVICE_UNAVAILABLE|THROTTLING|REQUEST_TIMEOUT)|"
    r"_TRANSPORT|_ALL_BROKERS_DOWN|_MSG_TIMED_OUT|_TIMED_OUT|_WAIT_COORD|Broker transport failure|"
    r"All broker connections are down|DisconnectException|NetworkException|"
    r"org\.apache\.kafka\.common\.errors\.TimeoutException",
    re.IGNORECASE,
)
# Which service a failure came from when no configured endpoint appears in it.
_SERVICE_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (BROKER, re.compile(r"org\.apache\.kafka|KafkaException|KafkaError|_TRANSPORT|_ALL_BROKERS_DOWN|librdkafka")),
    # Iceberg's data writers and S3FileIO streams talk only to storage; S3FileIO's AWS SDK v2 errors
    # name neither the address nor S3 ("Unable to execute HTTP request: Broken pipe").
    (
        OBJECT_STORE,
        re.compile(
            r"fs\.s3a|S3AFileSystem|AmazonS3|services\.s3\.|S3Exception|S3FileIO|s3a?://|"
            r"Failed to close current writer|S3OutputStream|S3InputStream|"
            r"multiple part upload|PutObject operation|in bucket '"
        ),
    ),
    (CATALOG, re.compile(r"org\.apache\.iceberg\.rest|RESTException|hive\.metastore|TTransportException|Glue")),
)


@dataclass(frozen=True)
class Endpoint:
    """One service the run talks to.

    Args:
        service: :data:`CATALOG`, :data:`OBJECT_STORE` or :data:`BROKER`.
        label: how the message names it (``catalog lake``).
        address: its URL or bootstrap servers, as configured.
    """

    service: str
    label: str
    address: str

    def netlocs(self) -> list[str]:
        """``host:port`` (or ``host``) strings that identify this endpoint in an error message."""
        out = []
        for raw in self.address.split(","):
            part = raw.strip()
            if not part:
                continue
            netloc = urlsplit(part if "://" in part else f"//{part}").netloc
            if netloc:
                out.append(netloc)
        return out


@dataclass(frozen=True)
class Outage:
    """A failed call classified as an outage of one service."""

    service: str
    endpoint: Endpoint | None
    reason: str

    def describe(self) -> str:
        """``the catalog (catalog lake, http://...)``."""
        where = f" ({self.endpoint.label}, {self.endpoint.address})" if self.endpoint else ""
        return f"the {self.service}{where}"


@dataclass(frozen=True)
class OutagePolicy:
    """How often and how long a run waits for a service to come back."""

    num_retries: int
    min_wait_ms: int
    max_wait_ms: int
    source: str = ""  # the environment file, named in the error

    def wait_seconds(self, retry: int, *, jitter: bool = True) -> float:
        """Wait before retry number ``retry`` (0-based): ``min_wait_ms`` doubled per retry, capped."""
        base: float = min(self.max_wait_ms, self.min_wait_ms * 2**retry) / 1000.0
        return base * (1.0 + random.random() * _JITTER) if jitter else base

    def settings(self) -> str:
        """The settings as the error message shows them."""
        where = f" in {self.source}" if self.source else ""
        return (
            f"outage_retry: num_retries={self.num_retries}, min_wait_ms={self.min_wait_ms}, "
            f"max_wait_ms={self.max_wait_ms}{where}"
        )


def _kafka_outage(exc: BaseException) -> str | None:
    # confluent-kafka raises KafkaException(KafkaError); retriable codes and transport errors count.
    try:
        from confluent_kafka import KafkaError, KafkaException
    except ImportError:  # pragma: no cover - confluent-kafka is a dependency
        return None
    if not isinstance(exc, KafkaException) or not exc.args or not isinstance(exc.args[0], KafkaError):
        return None
    err = exc.args[0]
    if err.fatal():
        return None
    transient = {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError._MSG_TIMED_OUT,
        KafkaError.BROKER_NOT_AVAILABLE,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError._WAIT_COORD,
        KafkaError.LEADER_NOT_AVAILABLE,
    }
    if err.code() in transient or err.retriable():
        return f"{err.name()}: {err.str()}"
    return None


def classify(exc: BaseException, endpoints: Sequence[Endpoint]) -> Outage | None:
    """The outage ``exc`` shows, or None when it is not a connection-level failure of a known service.

    The root cause speaks first: the first message from the innermost cause outwards that names a
    configured endpoint decides the service, else the first that names a client library.
    """
    brokers = [e for e in endpoints if e.service == BROKER]
    for error in error_chain(exc):
        if isinstance(error, KafkaIcebergError) and not isinstance(error, ErrorTopicError):
            return None  # a bad record, a conflict, a configuration error: its text may quote anything
        reason = _kafka_outage(error)
        if reason is not None:
            return Outage(BROKER, brokers[0] if brokers else None, reason)
    lines = messages(exc)
    failing = [line for line in lines if _CONNECTIVITY.search(line)]
    if not failing:
        return None
    reason = short_message(failing[-1])
    for line in reversed(lines):
        for endpoint in endpoints:
            if any(re.search(re.escape(netloc) + r"(?![\w.-])", line) for netloc in endpoint.netlocs()):
                return Outage(endpoint.service, endpoint, reason)
    for line in reversed(lines):
        for service, marker in _SERVICE_MARKERS:
            if marker.search(line):
                candidates = [e for e in endpoints if e.service == service]
                return Outage(service, candidates[0] if len(candidates) == 1 else None, reason)
    return None


def unavailable(outage: Outage, policy: OutagePolicy, retries: int) -> ServiceUnavailableError:
    """The error a run fails with once its retries are spent."""
    what = outage.describe()
    message = (
        f"SERVICE UNAVAILABLE: {what} did not answer: {outage.reason}. Gave up after {retries} "
        f"retr{'y' if retries == 1 else 'ies'} with backoff ({policy.settings()}). Batches committed "
        f"before are kept and the batch in flight was not committed: run the job again once the "
        f"{outage.service} answers; it resumes after its last commit."
    )
    return ServiceUnavailableError(
        message,
        service=outage.service,
        endpoint=outage.endpoint.address if outage.endpoint else None,
        reason=outage.reason,
        retries=retries,
    )


def endpoints_from(catalogs: Iterable[tuple[str, dict[str, str]]], bootstrap_servers: str | None) -> list[Endpoint]:
    """Endpoints of resolved catalog properties (``uri``, S3 endpoint) and of the Kafka cluster.

    Args:
        catalogs: ``(name, properties)`` per catalog, properties without ``spark.sql.catalog.<name>.``.
        bootstrap_servers: the resolved Kafka bootstrap servers, when the run reads Kafka.
    """
    out = []
    for name, props in catalogs:
        uri = props.get("uri", "")
        if "://" in uri and not uri.startswith("jdbc:"):
            out.append(Endpoint(CATALOG, f"catalog {name}", uri))
        storage = props.get("hadoop.fs.s3a.endpoint") or props.get("s3.endpoint")
        if storage:
            out.append(Endpoint(OBJECT_STORE, f"storage of catalog {name}", storage))
    if bootstrap_servers:
        out.append(Endpoint(BROKER, "kafka", bootstrap_servers))
    return out
