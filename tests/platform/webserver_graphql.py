"""The webserver's GraphQL API as the platform tests drive it: queries, the code location's
load status and stopping a sensor."""

from __future__ import annotations

from typing import Any

import requests

LOCATION = "streamplatform"
REPOSITORY = "__repository__"


def graphql(url: str, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``data`` of one GraphQL request; any error in the answer fails the test."""
    response = requests.post(
        f"{url}/graphql", json={"query": query, "variables": variables or {}}, timeout=60
    )
    response.raise_for_status()
    body = response.json()
    assert "errors" not in body, body
    return body["data"]


def location_loaded(url: str, reloads: list[str], max_reloads: int = 3) -> bool:
    """True once the code location loaded. A load error (the code server may not have
    answered yet) triggers a reload, recorded in ``reloads``; after ``max_reloads`` the
    test fails with the errors."""
    data = graphql(
        url,
        "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus "
        "locationOrLoadError { __typename ... on PythonError { message } } } } } }",
    )
    for entry in data["workspaceOrError"]["locationEntries"]:
        if entry["name"] != LOCATION:
            continue
        error = entry["locationOrLoadError"]
        if error is not None and error["__typename"] == "PythonError":
            assert len(reloads) < max_reloads, f"the code location failed to load: {reloads}"
            reloads.append(error["message"][:1000])
            graphql(
                url,
                "mutation($n: String!) { reloadRepositoryLocation(repositoryLocationName: $n) "
                "{ __typename } }",
                {"n": LOCATION},
            )
            return False
        return entry["loadStatus"] == "LOADED" and error is not None
    return False


def stop_sensor(url: str, sensor_id: str) -> None:
    """Stop the sensor with GraphQL id ``sensor_id``; fails unless it is STOPPED."""
    result = graphql(
        url,
        "mutation($id: String) { stopSensor(id: $id) { __typename "
        "... on StopSensorMutationResult { instigationState { status } } "
        "... on PythonError { message } } }",
        {"id": sensor_id},
    )["stopSensor"]
    assert result["__typename"] == "StopSensorMutationResult", result
    assert result["instigationState"]["status"] == "STOPPED", result
