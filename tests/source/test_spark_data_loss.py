"""Spark's Kafka source's data-loss failures said plainly (``source/spark_kafka.py``).

The messages are Spark 3.5's own (KafkaDataConsumer, KafkaMicroBatchStream), each followed by the
advice naming ``failOnDataLoss``; ``tests/e2e/test_data_loss.py`` meets the first one for real.
"""

from __future__ import annotations

import pytest

from kafka_iceberg.source.spark_kafka import spark_data_loss

ADVICE = (
    "Some data may have been lost because they are not available in Kafka any more; either the\n"
    " data was aged out by Kafka or the topic may have been deleted before all the data in the\n"
    ' topic was processed. If you don\'t want your streaming query to fail on such cases, set the\n source option "failOnDataLoss" to "false".'
)


@pytest.mark.parametrize(
    ("spark_says", "we_say"),
    [
        (
            "java.lang.IllegalStateException: Cannot fetch offset 4 (GroupId: spark-kafka-source-1-executor, "
            "TopicPartition: orders-0). ",
            "Cannot fetch offset 4 (TopicPartition: orders-0)",
        ),
        (
            "java.lang.IllegalStateException: Cannot fetch records in [4, 12) (GroupId: g, TopicPartition: orders-0). ",
            "Cannot fetch records in [4, 12) (TopicPartition: orders-0)",
        ),
        (
            "java.lang.IllegalStateException: Partition orders-0's offset was changed from 12 to 4, "
            "some data may have been missed.",
            "Partition orders-0's offset was changed from 12 to 4",
        ),
        (
            "java.lang.IllegalStateException: Added partition orders-3 starts from 5 instead of 0. "
            "Some data may have been missed.",
            "Added partition orders-3 starts from 5 instead of 0",
        ),
        (
            "java.lang.IllegalStateException: Set(orders-1, orders-2) are gone. Some data may have been missed.",
            "Set(orders-1, orders-2) are gone",
        ),
    ],
)
def test_each_data_loss_spark_reports_names_what_is_gone_and_the_setting(spark_says, we_say):
    error = spark_data_loss(
        RuntimeError(f"Job aborted due to stage failure:\n{spark_says}\n{ADVICE}"), "environments/prod.yml"
    )
    assert error is not None
    assert str(error).startswith(f"DATA LOSS: {we_say}. Records this job had not read yet are no longer in Kafka")
    assert str(error).endswith(
        "set kafka.fail_on_data_loss: false in environments/prod.yml: each range skipped is then logged."
    )


def test_other_failures_are_left_as_they_are():
    assert (
        spark_data_loss(RuntimeError("Cannot fetch offset 4 (GroupId: g, TopicPartition: t-0) timed out"), "x") is None
    )
