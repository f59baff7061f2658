"""Hourly-partitioned batch assets (``batch/<result>``) recomputed with local PySpark."""

from dagster import (
    AssetExecutionContext,
    AssetsDefinition,
    BackfillPolicy,
    HourlyPartitionsDefinition,
    MaterializeResult,
    MetadataValue,
    asset,
)
from dagster_pyspark import PySparkResource

from assets import domain
from assets.batch.recompute import RESULTS, recompute
from assets.keys import batch_key, lake_key
from assets.lake.paths import lake_root
from assets.settings import partitions_start

HOURLY = HourlyPartitionsDefinition(start_date=partitions_start())

_INPUTS = {
    "revenue_5m": (domain.ORDERS,),
    "revenue_hopping": (domain.ORDERS,),
    "fraud_alerts": (domain.ORDERS, domain.CUSTOMERS),
    "click_sessions": (domain.CLICKS,),
    "orders_deduped": (domain.ORDERS,),
}


def batch_asset(result: str) -> AssetsDefinition:
    """The hourly asset recomputing ``result`` (the batch twin of a stream topic)."""

    @asset(
        key=batch_key(result),
        deps=[lake_key(t) for t in _INPUTS[result]],
        partitions_def=HOURLY,
        backfill_policy=BackfillPolicy.single_run(),
        group_name="batch",
        kinds={"spark", "parquet"},
        description=f"Batch recompute of {RESULTS[result]!r} for one event hour (PySpark).",
    )
    def _recompute(context: AssetExecutionContext, pyspark: PySparkResource) -> MaterializeResult:
        # one hour, or a backfilled range in this one run and Spark session
        outputs = [
            recompute(result, key, lake_root(), pyspark.spark_session)
            for key in context.partition_keys
        ]
        for out in outputs:
            context.log.info(f"{result} {out.hour}: {len(out.frame)} rows")
        if len(outputs) > 1:
            return MaterializeResult(
                metadata={
                    "rows": sum(len(o.frame) for o in outputs),
                    "hours": len(outputs),
                    "rows_per_hour": MetadataValue.json({o.hour: len(o.frame) for o in outputs}),
                }
            )
        (out,) = outputs
        return MaterializeResult(
            metadata={
                "rows": len(out.frame),
                "event_hour": out.hour,
                "path": MetadataValue.path(str(out.path)),
                "preview": MetadataValue.md(out.frame.head(10).to_markdown(index=False)),
            }
        )

    return _recompute


BATCH_ASSETS = [batch_asset(result) for result in RESULTS]
