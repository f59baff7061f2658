"""A code location for tests that launch real runs (gRPC code server, run launcher, run
worker, multiprocess executor): the streaming assets, with their resources configured at
launch (run config ``resources.kafka`` / ``resources.stream_apps``)."""

from dagster import Definitions

from assets.streams import STREAM_ASSETS
from resources.kafka import KafkaResource
from resources.stream_apps import StreamAppsResource

defs = Definitions(
    assets=STREAM_ASSETS,
    resources={
        "kafka": KafkaResource.configure_at_launch(),
        "stream_apps": StreamAppsResource.configure_at_launch(),
    },
)
