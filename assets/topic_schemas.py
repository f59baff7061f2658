"""The raw topics' schemas as asset metadata: what the asset catalog shows of each topic.

``column_schema`` is a topic's ``.avsc`` as a Dagster ``TableSchema`` (one column per field,
its Avro type, nullable unions marked), declared on the raw topic assets so the catalog
shows the fields before anything ran. ``registered_schema_metadata`` is what a
materialization adds when the topics are Avro: the subject, the version and id the
registry holds, and the fields of that registered schema.
"""

from typing import Any

from dagster import MetadataValue, TableColumn, TableColumnConstraints, TableSchema

from pipelines.schemas import RawFormat, avro_schema, subject


def avro_type_name(avro_type: Any) -> str:
    """An Avro field type in a few characters (``string``, ``array<string>``; a nullable
    union as its other branch)."""
    if isinstance(avro_type, list):
        branches = [avro_type_name(t) for t in avro_type if t != "null"]
        return branches[0] if len(branches) == 1 else " | ".join(branches)
    if isinstance(avro_type, dict):
        if avro_type.get("type") == "array":
            return f"array<{avro_type_name(avro_type['items'])}>"
        return str(avro_type.get("logicalType") or avro_type.get("name") or avro_type["type"])
    return str(avro_type)


def table_schema(schema: dict[str, Any]) -> TableSchema:
    """The fields of an Avro record schema as a ``TableSchema``."""
    return TableSchema(
        columns=[
            TableColumn(
                name=f["name"],
                type=avro_type_name(f["type"]),
                description=f.get("doc"),
                constraints=TableColumnConstraints(
                    nullable=isinstance(f["type"], list) and "null" in f["type"]
                ),
            )
            for f in schema["fields"]
        ]
    )


def column_schema(topic: str) -> dict[str, Any]:
    """The static metadata of raw topic ``topic``: its ``.avsc`` fields and record name."""
    schema = avro_schema(topic)
    return {
        "dagster/column_schema": table_schema(schema),
        "avro_record": f"{schema['namespace']}.{schema['name']}",
    }


def registered_schema_metadata(raw_format: RawFormat, kafka_topic: str) -> dict[str, Any]:
    """The value schema registered for ``kafka_topic`` (its latest version): subject,
    version, id and fields; nothing when the topics are not Avro."""
    if not raw_format.avro or raw_format.registry is None:
        return {}
    import json

    name = subject(kafka_topic)
    client = raw_format.registry.client()
    # the versions, asked every time (the client caches its "latest" for ever)
    registered = client.get_version(name, max(client.get_versions(name)))
    return {
        "value_format": "avro",
        "schema_subject": name,
        "schema_version": registered.version,
        "schema_id": registered.schema_id,
        "schema_registry": MetadataValue.url(raw_format.registry.url),
        "dagster/column_schema": table_schema(json.loads(registered.schema.schema_str)),
    }
