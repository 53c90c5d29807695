"""Options of Spark's Kafka source rendered from a spec and an environment, secrets masked."""

from __future__ import annotations

from kafka_iceberg.environment import KafkaSettings
from kafka_iceberg.refs import MASK, Resolver, secret_env_name
from kafka_iceberg.source.kafka import client_config, describe_options, spark_source_options
from kafka_iceberg.spec.model import SourceSpec

SASL = KafkaSettings(
    bootstrap_servers="${env:BOOT}",
    security_protocol="SASL_SSL",
    sasl_mechanism="SCRAM-SHA-512",
    sasl_username="${secret:kafka/user}",
    sasl_password="${secret:kafka/password}",
    spark_options={"kafka.request.timeout.ms": "60000"},
    fail_on_data_loss=False,
)


def test_subscribe_with_bounds_and_per_partition_offsets():
    source = SourceSpec(
        topics=["orders", "refunds"], starting_offsets={"orders": {"0": 42, "1": -2}}, max_records_per_batch=5000
    )
    opts = spark_source_options(source, KafkaSettings(bootstrap_servers="b:9092"), shaded=False)
    assert opts == {
        "kafka.bootstrap.servers": "b:9092",
        "subscribe": "orders,refunds",
        "startingOffsets": '{"orders": {"0": 42, "1": -2}}',
        "maxOffsetsPerTrigger": "5000",
        "failOnDataLoss": "true",
        "includeHeaders": "true",
        "kafka.security.protocol": "PLAINTEXT",
    }


def test_pattern_and_sasl_on_databricks_use_the_shaded_login_module():
    opts = spark_source_options(SourceSpec(topic_pattern="audit_.*"), SASL, shaded=True)
    assert opts["subscribePattern"] == "audit_.*" and "subscribe" not in opts
    assert opts["startingOffsets"] == "earliest" and opts["failOnDataLoss"] == "false"
    assert opts["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert opts["kafka.sasl.jaas.config"] == (
        "kafkashaded.org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="${secret:kafka/user}" password="${secret:kafka/password}";'
    )
    assert opts["kafka.request.timeout.ms"] == "60000"


def test_printed_options_mask_every_credential():
    opts = spark_source_options(SourceSpec(topics=["t"]), SASL, shaded=False)
    printed = describe_options(opts)
    assert printed["kafka.sasl.jaas.config"] == MASK
    assert printed["kafka.bootstrap.servers"] == "${env:BOOT}"
    conf = describe_options(client_config(SASL, "consumer"))
    assert conf["sasl.password"] == MASK and conf["sasl.username"] == MASK  # from a secret reference


def test_resolved_options_carry_the_secret_values():
    env = {
        "BOOT": "broker:9096",
        secret_env_name("kafka", "user"): "svc",
        secret_env_name("kafka", "password"): "pw-123456",
    }
    resolver = Resolver(env=env)
    opts = {k: resolver.value(v) for k, v in spark_source_options(SourceSpec(topics=["t"]), SASL, shaded=False).items()}
    assert opts["kafka.bootstrap.servers"] == "broker:9096"
    assert 'username="svc" password="pw-123456"' in opts["kafka.sasl.jaas.config"]
