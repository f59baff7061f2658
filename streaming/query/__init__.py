"""Interactive queries over HTTP: ``QueryServer`` answers for every key of every instance.

``QueryServer(streams).start()`` serves the local stores of a running ``KafkaStreams`` at its
``application.server`` address and forwards requests for keys other instances own (see
``streaming.query.service`` for the routes); ``/metrics`` is Prometheus text
(``streaming.query.prometheus``) and ``/health`` the application state.
"""

from streaming.query.server import QueryServer
from streaming.query.service import QueryService, Response

__all__ = ["QueryServer", "QueryService", "Response"]
