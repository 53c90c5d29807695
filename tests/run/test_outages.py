"""Which failures count as an outage of which service, the backoff, and the final message (no JVM:
the error texts are those the JVM clients and librdkafka gave when the local stack's services were
stopped, see tests/e2e/test_outages.py)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from kafka_iceberg.errors import RecordError
from kafka_iceberg.run.outages import (
    BROKER,
    CATALOG,
    OBJECT_STORE,
    OutagePolicy,
    classify,
    endpoints_from,
    unavailable,
)

ENDPOINTS = endpoints_from(
    [("lake", {"uri": "http://127.0.0.1:16016", "hadoop.fs.s3a.endpoint": "http://127.0.0.1:13347"})],
    "127.0.0.1:15313",
)

CATALOG_DOWN = """An error occurred while calling o77.refresh.
: org.apache.iceberg.exceptions.RESTException: Error occurred while processing GET request
\tat org.apache.iceberg.rest.HTTPClient.execute(HTTPClient.java:318)
Caused by: org.apache.iceberg.shaded.org.apache.hc.client5.http.HttpHostConnectException: Connect to http://127.0.0.1:16016 failed: Connection refused
\tat java.base/sun.nio.ch.Net.pollConnect(Native Method)"""

STORE_DOWN = """An error occurred while calling o667.append.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 79.0 failed 1 times
Caused by: java.io.UncheckedIOException: Failed to create Parquet file
Caused by: org.apache.hadoop.fs.s3a.AWSClientIOException: getFileStatus on s3://warehouse/t/data/f.parquet: com.amazonaws.SdkClientException: Unable to execute HTTP request: Connect to 127.0.0.1:13347 [/127.0.0.1] failed: Connection refused
Caused by: java.net.ConnectException: Connection refused"""


# Iceberg's S3FileIO (AWS SDK v2) when the object store stops while a task writes: no address, no "s3".
S3FILEIO_WRITE_DOWN = """An error occurred while calling o608.append.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 13.0 failed 1 times, most recent failure: Lost task 0.0 in stage 13.0 (TID 26) (localhost executor driver): java.io.UncheckedIOException: Failed to close current writer
Caused by: java.io.IOException: software.amazon.awssdk.core.exception.SdkClientException: Unable to execute HTTP request: Broken pipe (SDK Attempt Count: 1)
Caused by: software.amazon.awssdk.core.exception.SdkClientException: Unable to execute HTTP request: Broken pipe (SDK Attempt Count: 1)
Caused by: java.net.SocketException: Broken pipe"""


class FakeJavaThrowable:
    """What py4j hands over: toString() and getCause()."""

    def __init__(self, text, cause=None):
        self.text, self.cause = text, cause

    def toString(self):  # the Java method names
        return self.text

    def getCause(self):
        return self.cause


def java_error(*chain):
    cause = None
    for text in reversed(chain):
        cause = FakeJavaThrowable(text, cause)
    exc = Exception("An error occurred while calling o12.sql.")
    exc.java_exception = cause
    return exc


def test_the_endpoint_in_the_root_cause_names_the_service():
    catalog = classify(Exception(CATALOG_DOWN), ENDPOINTS)
    assert catalog is not None and catalog.service == CATALOG
    assert catalog.endpoint.address == "http://127.0.0.1:16016"
    assert catalog.reason == "HttpHostConnectException: Connect to http://127.0.0.1:16016 failed: Connection refused"

    store = classify(Exception(STORE_DOWN), ENDPOINTS)
    assert store is not None and store.service == OBJECT_STORE
    assert store.endpoint.label == "storage of catalog lake"


def test_a_data_file_writer_losing_the_object_store_is_its_outage():
    store = classify(Exception(S3FILEIO_WRITE_DOWN), ENDPOINTS)
    assert store is not None and store.service == OBJECT_STORE
    assert store.endpoint.label == "storage of catalog lake"
    assert store.reason == "SocketException: Broken pipe"


def test_the_arrow_writers_task_losing_the_object_store_is_its_outage():
    """pyarrow's S3 filesystem (AWS SDK for C++) inside a Python worker, as Spark reports it."""
    worker = (
        "An exception was thrown from the Python worker. Please see the stack trace below.\n"
        "Traceback (most recent call last):\n"
        '  File "pyiceberg/io/pyarrow.py", line 413, in create\n'
        "    raise  # pragma: no cover - If some other kind of OSError, raise the raw error\n"
        "OSError: When initiating multiple part upload for key 'data/x.parquet' in bucket 'lake': AWS Error "
        "NETWORK_CONNECTION during CreateMultipartUpload operation: curlCode: 7, Could not connect to server"
    )
    named = worker + "; Details: Failed to connect to 127.0.0.1:13347 after 0 ms: Could not connect to server"
    store = classify(Exception(named), ENDPOINTS)  # the endpoint named: its service
    assert store is not None and store.service == OBJECT_STORE and store.endpoint.label == "storage of catalog lake"
    store = classify(Exception(worker), ENDPOINTS)  # none named: the S3 words tell the service
    assert store is not None and store.service == OBJECT_STORE
    assert store.reason.startswith("OSError: When initiating multiple part upload")
    # The store answering "try again" (chaos seed 611400003, full size: a 500 on UploadPart under load)
    busy = (
        "OSError: When uploading part for key 'events/data/x.parquet' in bucket 'warehouse': AWS Error "
        "INTERNAL_FAILURE during UploadPart operation: We encountered an internal error, please try again."
    )
    store = classify(Exception(busy), ENDPOINTS)
    assert store is not None and store.service == OBJECT_STORE


def test_the_java_cause_chain_is_read_through_py4j():
    exc = java_error(
        "org.apache.iceberg.exceptions.RESTException: Error occurred while processing POST request",
        "java.net.SocketTimeoutException: Read timed out",
    )
    outage = classify(exc, ENDPOINTS)
    # No endpoint in the text: the client library tells the service.
    assert outage is not None and outage.service == CATALOG
    assert outage.reason == "SocketTimeoutException: Read timed out"


@pytest.mark.parametrize(
    "code",
    [
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError._WAIT_COORD,
        KafkaError.REQUEST_TIMED_OUT,
    ],
)
def test_kafka_transport_errors_are_broker_outages(code):
    outage = classify(KafkaException(KafkaError(code, "Failed to get metadata")), ENDPOINTS)
    assert outage is not None and outage.service == BROKER
    assert outage.endpoint.address == "127.0.0.1:15313"


@pytest.mark.parametrize(
    "exc",
    [
        KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "not allowed")),
        Exception("org.apache.iceberg.exceptions.NoSuchTableException: Table does not exist: ns.t"),
        Exception("org.apache.iceberg.exceptions.ForbiddenException: Forbidden: http://127.0.0.1:16016 said no"),
        # A bad record may quote anything, even words of a network failure.
        RecordError(
            "bad record t/0/5: Connection refused is not JSON",
            topic="t",
            partition=0,
            offset=5,
            stage="decode",
            reason="Connection refused is not JSON",
        ),
    ],
)
def test_other_failures_are_not_outages(exc):
    assert classify(exc, ENDPOINTS) is None


def test_an_endpoint_matches_only_its_whole_port():
    endpoints = endpoints_from(
        [("lake", {"uri": "http://127.0.0.1:1601", "s3.endpoint": "http://127.0.0.1:16016"})], None
    )
    outage = classify(Exception("Connect to 127.0.0.1:16016 failed: Connection refused"), endpoints)
    assert outage is not None and outage.service == OBJECT_STORE


def test_a_connection_failure_of_an_unknown_service_is_not_retried():
    assert classify(Exception("java.net.ConnectException: Connection refused"), ENDPOINTS) is None


def test_waits_double_up_to_the_cap():
    policy = OutagePolicy(num_retries=5, min_wait_ms=200, max_wait_ms=1000)
    assert [policy.wait_seconds(i, jitter=False) for i in range(5)] == [0.2, 0.4, 0.8, 1.0, 1.0]
    assert all(0.2 <= policy.wait_seconds(0) <= 0.22 for _ in range(50))


def test_the_final_error_names_service_endpoint_settings_and_what_to_do():
    outage = classify(Exception(CATALOG_DOWN), ENDPOINTS)
    policy = OutagePolicy(num_retries=2, min_wait_ms=300, max_wait_ms=5000, source="environments/local.yml")
    error = unavailable(outage, policy, retries=2)
    assert (error.service, error.endpoint, error.retries) == (CATALOG, "http://127.0.0.1:16016", 2)
    text = str(error)
    assert "\n" not in text
    assert text.startswith("SERVICE UNAVAILABLE: the catalog (catalog lake, http://127.0.0.1:16016) did not answer")
    assert "outage_retry: num_retries=2, min_wait_ms=300, max_wait_ms=5000 in environments/local.yml" in text
    assert "run the job again once the catalog answers" in text
