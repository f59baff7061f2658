"""How the runs launched from the asset graph execute (the UI's "Materialize", backfills,
the dbt automation): every step in the run's own process, so a run starts Python and its
Spark session once whatever the number of steps (a step per process would start a JVM per
Spark step); a run of a long-running streaming asset alone keeps Dagster's multiprocess
executor, whose step process the UI's Terminate interrupts while the run process ends the
run CANCELED (``assets.streams.RunTermination`` closes the application cleanly)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dagster import Executor, executor, multiprocess_executor
from dagster._core.definitions.executor_definition import multiple_process_executor_requirements
from dagster._core.execution.retries import RetryMode
from dagster._core.executor.in_process import InProcessExecutor

#: the op tag of a streaming asset (``assets.streams``): runs until it is stopped
STREAMING_OP_TAG = ("streaming", "long-running")


def has_streaming_step(execution_plan: Any) -> bool:
    """Whether a step of ``execution_plan`` runs a long-running streaming asset."""
    key, value = STREAMING_OP_TAG
    return any(
        (step.tags or {}).get(key) == value
        for step in execution_plan.get_steps_to_execute_in_topo_order()
    )


class PerRunKindExecutor(Executor):
    """In process, or one process per step for a run with a streaming step."""

    def __init__(self, in_process: Executor, per_step: Executor) -> None:
        self.in_process = in_process
        self.per_step = per_step

    @property
    def retries(self) -> RetryMode:
        return self.per_step.retries

    def execute(self, plan_context: Any, execution_plan: Any) -> Iterator[Any]:
        chosen = self.per_step if has_streaming_step(execution_plan) else self.in_process
        return chosen.execute(plan_context, execution_plan)


@executor(
    name="platform_executor",
    config_schema=multiprocess_executor.config_schema.as_field(),
    requirements=multiple_process_executor_requirements(),
)
def platform_executor(init_context: Any) -> PerRunKindExecutor:
    """The executor of the platform's asset runs (the multiprocess executor's settings)."""
    create_multiprocess = multiprocess_executor.executor_creation_fn
    assert create_multiprocess is not None  # dagster's own executor always has one
    per_step = create_multiprocess(init_context)
    in_process = InProcessExecutor(
        retries=per_step.retries, step_dependency_config=per_step.step_dependency_config
    )
    return PerRunKindExecutor(in_process, per_step)
