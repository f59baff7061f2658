"""What the run queue already holds: a sensor requests no run of a partition that is still
queued or running, or that one created after the hour was complete already covers (a second
Spark run of the same hour would only repeat its work)."""

from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

IN_FLIGHT = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
]


def partition_in_flight(instance: DagsterInstance, job_name: str, partition_key: str) -> bool:
    """Whether a run of ``job_name`` for ``partition_key`` is queued or running."""
    runs = instance.get_run_records(
        filters=RunsFilter(
            job_name=job_name,
            statuses=IN_FLIGHT,
            tags={"dagster/partition": partition_key},
        ),
        limit=1,
    )
    return bool(runs)


def latest_run_created(
    instance: DagsterInstance,
    job_name: str,
    partition_key: str,
    statuses: list[DagsterRunStatus] | None = None,
) -> float | None:
    """When the newest run of ``job_name`` for ``partition_key`` (of ``statuses``, any
    when None) was created (epoch seconds; None without one)."""
    records = instance.get_run_records(
        filters=RunsFilter(
            job_name=job_name, tags={"dagster/partition": partition_key}, statuses=statuses
        ),
        limit=1,
    )
    return records[0].create_timestamp.timestamp() if records else None


#: the runs that land and reconcile an hour, or will: not a cancelled or failed one
COVERING = [*IN_FLIGHT, DagsterRunStatus.SUCCESS]
