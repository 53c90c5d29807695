"""`make demo` (kafka-iceberg demo): the shop pipeline on a fresh stack of its own, results read back."""

from __future__ import annotations

import pytest

from kafka_iceberg.local import processes
from kafka_iceberg.local.stack import LocalStack
from tests.support.project import entry_point

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_demo_runs_the_shop_pipeline_and_prints_what_landed(tmp_path):
    run_dir = tmp_path / "demo"
    result = entry_point("kafka-iceberg", "demo", "--run-dir", str(run_dir), stack_dir=str(tmp_path / "unused"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "sales.orders  (pyiceberg, s3://warehouse/sales/orders) (3 rows)" in out
    orders = out.split("sales.orders  (pyiceberg")[1].split("\n\n")[0]
    assert "double espresso" in orders and "latte" in orders and "mocha" in orders
    assert orders.count("espresso") == 1  # the upsert replaced id 1
    assert "sales.orders_quarantine" in out and "expectation:valid_id" in out
    assert "orders_errors (1 records, read with a Kafka consumer)" in out and "extendinfos" in out
    assert "stock.inventory" in out and "3.60" in out
    assert "ops.blobs" in out and "00 01 02 fd fe ff" in out
    # The Debezium stream leaves the source's final state: product 1 at its newest price, 2 deleted.
    products = out.split("stock.products  (pyiceberg")[1].split("\n\n")[0]
    assert "(1 rows)" in products and "mug" in products and "8.5" in products and "cup" not in products
    # Avro of two schema versions through the registry: the second's optional field became a column.
    payments = out.split("sales.payments  (pyiceberg")[1].split("\n\n")[0]
    assert "(3 rows)" in payments and "coupon" in payments and "SPRING" in payments and "CASH" in payments
    assert "payments_errors (1 records, read with a Kafka consumer)" in out and "wrong magic byte" in out
    verified = out.split("kafka-iceberg verify")[1]
    assert "FAILED" not in verified and verified.count("  ok") == 7, verified
    assert "sales.orders  [per-batch" in verified  # upsert: reconciled per batch, and it says so
    assert "web.clicks  [per-offset; table; dropped on purpose 1]" in verified  # skip_error's drop
    assert "local stack stopped" in out
    assert LocalStack(run_dir).read_state() is None  # stopped and forgotten
    leftovers = [pid for pid in _pids() if str(run_dir) in " ".join(processes.cmdline(pid))]
    assert not leftovers, "the demo left servers running"


def _pids():
    from pathlib import Path

    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
