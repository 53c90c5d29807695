"""Stage 2: where micro-batches come from — Spark's Kafka source, replay files, the direct reader.

Every source yields Kafka-shaped DataFrames (``kafka_iceberg.records.KAFKA_SCHEMA_DDL``) that
feed the same decode → checks → write path.
"""
