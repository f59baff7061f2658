"""The Dagster UI in a real browser: Debian's chromium (``/usr/bin/chromium``) driven by
playwright opens the UI of a ``dagster dev`` started here, shows the asset graph, launches a
materialization (the raw-topics group's "Materialize all") and a partition backfill, and
checks through GraphQL that both succeed. Screenshots go to ``test-artifacts/``."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
REPO_PATH = "__repository__@streamplatform"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def dagster_ui(kafka_cluster, tmp_path_factory):
    home = tmp_path_factory.mktemp("dagster-home")
    shutil.copyfile(REPO / "platform" / "dagster.yaml", home / "dagster.yaml")
    port = _free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "KAFKA_BOOTSTRAP_SERVERS": kafka_cluster.bootstrap_servers,
        "STREAM_STATE_DIR": str(tmp_path_factory.mktemp("state")),
        "LAKE_ROOT": str(tmp_path_factory.mktemp("lake")),
        "GX_ANALYTICS_ENABLED": "false",
        "PYTHONPATH": str(REPO),
    }
    dagster = str(Path(sys.executable).with_name("dagster"))
    proc = subprocess.Popen(
        [dagster, "dev", "-w", "workspace.yaml", "-p", str(port), "-h", "127.0.0.1"],
        cwd=REPO,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 420
        while time.monotonic() < deadline:
            assert proc.poll() is None, "dagster dev exited"
            try:
                if requests.get(f"{url}/server_info", timeout=2).ok and _location_loaded(url):
                    break
            except requests.RequestException:
                pass
            time.sleep(1)
        else:
            raise AssertionError("the Dagster UI did not come up in 420 s")
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # run workers and code servers of the session


def _graphql(url: str, query: str, variables: dict | None = None) -> dict:
    response = requests.post(
        f"{url}/graphql", json={"query": query, "variables": variables or {}}, timeout=30
    )
    response.raise_for_status()
    body = response.json()
    assert "errors" not in body, body
    return body["data"]


_RELOADS: list[str] = []


def _location_loaded(url: str) -> bool:
    """True once the code location loaded. A load error (e.g. the code server was not
    reachable while it started) triggers a reload, three times at most, then fails."""
    data = _graphql(
        url,
        "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus "
        "locationOrLoadError { __typename ... on PythonError { message } } } } } }",
    )
    for entry in data["workspaceOrError"]["locationEntries"]:
        error = entry["locationOrLoadError"]
        if error is not None and error["__typename"] == "PythonError":
            if len(_RELOADS) >= 3:
                raise AssertionError(f"code location failed to load: {_RELOADS}")
            _RELOADS.append(error["message"][:500])
            _graphql(
                url,
                "mutation($n: String!) { reloadRepositoryLocation(repositoryLocationName: $n) "
                "{ __typename } }",
                {"n": entry["name"]},
            )
            return False
        if entry["loadStatus"] == "LOADED" and error is not None:
            return True
    return False


def _wait_run(url: str, run_id: str, timeout: float = 300) -> str:
    deadline = time.monotonic() + timeout
    status = None
    while time.monotonic() < deadline:
        data = _graphql(
            url,
            "query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }",
            {"id": run_id},
        )
        status = data["runOrError"]["status"]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            return status
        time.sleep(2)
    return f"timeout ({status})"


def test_ui_graph_materialization_and_backfill(dagster_ui) -> None:
    from playwright.sync_api import sync_playwright

    url = dagster_ui
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        # the global asset graph: lineage from the raw topics to the marts, by group
        page.goto(f"{url}/asset-groups", wait_until="networkidle")
        for group in ("kafka_raw", "streams", "lake", "batch", "reconciliation", "dbt"):
            page.get_by_text(group, exact=True).first.wait_for(timeout=60_000)
        page.screenshot(path=str(ARTIFACTS / "dagster-asset-graph.png"), full_page=True)
        # the streaming assets' group graph, asset by asset
        page.goto(f"{url}/locations/{REPO_PATH}/asset-groups/streams", wait_until="networkidle")
        page.get_by_text("revenue-per-region-5m").first.wait_for(timeout=60_000)
        page.screenshot(path=str(ARTIFACTS / "dagster-streams-group.png"), full_page=True)

        # a materialization launched from the UI: the raw-topics group's "Materialize all"
        page.goto(f"{url}/locations/{REPO_PATH}/asset-groups/kafka_raw", wait_until="networkidle")
        page.get_by_role("button", name="Materialize all").first.click(timeout=60_000)
        run_id = None
        deadline = time.monotonic() + 60
        while run_id is None and time.monotonic() < deadline:
            runs = _graphql(
                url,
                "{ runsOrError(limit: 5) { ... on Runs { results { runId jobName } } } }",
            )["runsOrError"]["results"]
            run_id = next((r["runId"] for r in runs), None)
            time.sleep(1)
        assert run_id, "no run was launched from the UI"
        assert _wait_run(url, run_id) == "SUCCESS"
        page.goto(f"{url}/runs/{run_id}", wait_until="networkidle")
        page.screenshot(path=str(ARTIFACTS / "dagster-materialization-run.png"))

        # a partition backfill of the hourly batch + reconciliation assets
        data = _graphql(
            url,
            "query($g: AssetGroupSelector!) { assetNodes(group: $g) { assetKey { path } "
            "partitionKeysByDimension { partitionKeys } } }",
            {
                "g": {
                    "groupName": "batch",
                    "repositoryName": "__repository__",
                    "repositoryLocationName": "streamplatform",
                }
            },
        )
        nodes = data["assetNodes"]
        assert nodes, "no batch assets in the code location"
        keys = nodes[0]["partitionKeysByDimension"][0]["partitionKeys"]
        partition = keys[-2]  # the last complete hour
        result = _graphql(
            url,
            "mutation($p: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $p) "
            "{ __typename ... on LaunchBackfillSuccess { backfillId } "
            "... on PythonError { message } } }",
            {
                "p": {
                    "assetSelection": [{"path": n["assetKey"]["path"]} for n in nodes],
                    "partitionNames": [partition],
                    "fromFailure": False,
                }
            },
        )["launchPartitionBackfill"]
        assert result["__typename"] == "LaunchBackfillSuccess", result
        backfill_id = result["backfillId"]
        status = None
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            status = _graphql(
                url,
                "query($id: String!) { partitionBackfillOrError(backfillId: $id) "
                "{ ... on PartitionBackfill { status } } }",
                {"id": backfill_id},
            )["partitionBackfillOrError"]["status"]
            if status in (
                "COMPLETED",
                "COMPLETED_SUCCESS",
                "FAILED",
                "COMPLETED_FAILED",
                "CANCELED",
            ):
                break
            time.sleep(3)
        assert status in ("COMPLETED", "COMPLETED_SUCCESS"), status
        page.goto(f"{url}/overview/backfills/{backfill_id}", wait_until="networkidle")
        page.screenshot(path=str(ARTIFACTS / "dagster-backfill.png"))
        browser.close()
