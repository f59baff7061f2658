"""Java UDF class names -> Python functions: what ``CREATE FUNCTION name AS 'a.b.Class'``
(Flink's default ``LANGUAGE JAVA``) runs here, where no JVM loads the class.

Flink loads the class from a JAR; this engine is Python, so a Java function runs only if
a Python implementation of it was registered under the class name (``register``), e.g.
``bench.nexmark.udf`` registers Nexmark's ``com.github.nexmark.flink.udf.CountChar``. It
is a deliberate difference from Flink: the Python function must compute what the Java
class does; an unregistered class is a ``SqlError`` naming it.
"""

from __future__ import annotations

from typing import Any

#: Java class name -> the Python function (or ``'module.attr'`` path) that stands in for it
_REGISTERED: dict[str, Any] = {}


def register(class_name: str, function: Any) -> None:
    """Run ``function`` (a Python function, or its ``'module.attr'`` path) wherever a
    statement creates a function AS the Java class ``class_name``."""
    _REGISTERED[class_name] = function


def registered(class_name: str) -> Any | None:
    """The Python stand-in for the Java class ``class_name`` (None: none registered)."""
    return _REGISTERED.get(class_name)


def registered_names() -> list[str]:
    """The Java class names that have a Python stand-in, sorted."""
    return sorted(_REGISTERED)
