"""Exception handlers (deserialization, processing, production), dead letters, uncaught errors.

Kafka Streams' handler choices: ``log_and_fail`` (the default) and ``log_and_continue``
(``LogAndFailExceptionHandler`` / ``LogAndContinueExceptionHandler`` and their processing
counterparts; ``DefaultProductionExceptionHandler`` fails). A handler is a name, or any
callable ``handler(context, record, exception) -> Response | "continue" | "fail"``, or an
object with such a ``handle`` method. With ``errors.dead.letter.queue.topic.name`` set, every
record a handler skips or fails on is also written to that topic with its original key and
value bytes and KIP-1034's ``__streams.errors.*`` headers.
"""

from __future__ import annotations

import enum
import logging
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

HEADER_EXCEPTION = "__streams.errors.exception"
HEADER_STACKTRACE = "__streams.errors.stacktrace"
HEADER_MESSAGE = "__streams.errors.message"
HEADER_TOPIC = "__streams.errors.topic"
HEADER_PARTITION = "__streams.errors.partition"
HEADER_OFFSET = "__streams.errors.offset"


class Response(enum.Enum):
    """What a handler decides: skip the record and go on, or stop processing."""

    CONTINUE = "continue"
    FAIL = "fail"


# Kafka's per-handler enum names
DeserializationHandlerResponse = Response
ProcessingHandlerResponse = Response
ProductionExceptionHandlerResponse = Response


class StreamThreadExceptionResponse(enum.Enum):
    """What to do when a stream thread dies (Kafka's ``StreamThreadExceptionResponse``)."""

    REPLACE_THREAD = "replace_thread"
    SHUTDOWN_CLIENT = "shutdown_client"
    SHUTDOWN_APPLICATION = "shutdown_application"


@dataclass(frozen=True, slots=True)
class ErrorHandlerContext:
    """Where a failure happened: the source record's coordinates, node and task."""

    topic: str | None
    partition: int
    offset: int
    timestamp: int
    headers: Any
    processor_node_id: str | None
    task_id: str | None


Handler = Callable[[ErrorHandlerContext, Any, Exception], Any]


def log_and_fail(context: ErrorHandlerContext, record: Any, exception: Exception) -> Response:
    """Log the failure and stop (Kafka's ``LogAndFail*ExceptionHandler``)."""
    log.error(
        "Exception caught for record %s-%s@%s (task %s, node %s); failing: %s",
        context.topic,
        context.partition,
        context.offset,
        context.task_id,
        context.processor_node_id,
        exception,
    )
    return Response.FAIL


def log_and_continue(context: ErrorHandlerContext, record: Any, exception: Exception) -> Response:
    """Log the failure and skip the record (Kafka's ``LogAndContinue*ExceptionHandler``)."""
    log.warning(
        "Exception caught for record %s-%s@%s (task %s, node %s); skipping it: %s",
        context.topic,
        context.partition,
        context.offset,
        context.task_id,
        context.processor_node_id,
        exception,
    )
    return Response.CONTINUE


_BY_NAME: dict[str, Handler] = {
    "logandfail": log_and_fail,
    "fail": log_and_fail,
    "logandcontinue": log_and_continue,
    "continue": log_and_continue,
    "default": log_and_fail,
}


def handler_from_config(value: Any) -> Handler:
    """A handler from a config value: a name (Kafka class names work), a callable or object."""
    if isinstance(value, str):
        simple = value.rsplit(".", 1)[-1].replace("_", "").replace("-", "").lower()
        for suffix in (
            "processingexceptionhandler",
            "productionexceptionhandler",
            "exceptionhandler",
            "handler",
        ):
            simple = simple.removesuffix(suffix)
        if simple in _BY_NAME:
            return _BY_NAME[simple]
        raise ValueError("use 'log_and_fail', 'log_and_continue' or a handler callable")
    if isinstance(value, type):
        value = value()
    handle = getattr(value, "handle", None)
    if callable(handle):
        return handle
    if callable(value):
        return value
    raise ValueError("a handler must be a name, a callable or an object with handle()")


def decide(handler: Handler, context: ErrorHandlerContext, record: Any, exc: Exception) -> Response:
    """Call a handler and normalise what it returns to a ``Response``."""
    result = handler(context, record, exc)
    if isinstance(result, Response):
        return result
    if isinstance(result, enum.Enum):
        result = result.value if isinstance(result.value, str) else result.name
    if isinstance(result, str) and result.strip().lower() in ("continue", "resume"):
        return Response.CONTINUE
    if isinstance(result, str) and result.strip().lower() == "fail":
        return Response.FAIL
    raise TypeError(
        f"exception handler {handler!r} returned {result!r}; use Response.CONTINUE/FAIL"
    )


def dead_letter_headers(
    context: ErrorHandlerContext, exception: BaseException
) -> list[tuple[str, bytes]]:
    """KIP-1034 headers describing the failure and the original record's coordinates."""
    cls = type(exception)
    name = f"{cls.__module__}.{cls.__qualname__}"
    message = str(exception)
    stack = "".join(traceback.format_exception(cls, exception, exception.__traceback__))
    return [
        (HEADER_EXCEPTION, f"{name}: {message}".encode() if message else name.encode()),
        (HEADER_MESSAGE, message.encode()),
        (HEADER_STACKTRACE, stack.encode()),
        (HEADER_TOPIC, (context.topic or "").encode()),
        (HEADER_PARTITION, str(context.partition).encode()),
        (HEADER_OFFSET, str(context.offset).encode()),
    ]
