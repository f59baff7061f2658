"""The Dagster UI in a real browser: Debian's chromium (``/usr/bin/chromium``) driven by
playwright opens the UI of a ``dg dev`` started here, against the test's own broker
with the stream applications running (the supervisor, as ``make run`` starts it) and two
hours of generated events fed in 5-minute slices (``feeding.feed``). It

- shows the asset graph and the streams group;
- launches the generator from the UI (the raw-topics group's "Materialize all");
- launches a streaming asset (``windowed_revenue``) from its asset page, waits until its run
  reported an observation, terminates it from the run page and sees the run CANCELED;
- lands the lake from the UI (the lake group's "Materialize all"): the Great Expectations
  checks on the lake assets run with it and pass;
- backfills the two hours of the batch + reconciliation groups (GraphQL
  ``launchPartitionBackfill``): one run for the range (their single-run backfill policy),
  whose reconciliation checks (``<result>_stream_matches_batch``) pass for every hour.

Everything is checked through GraphQL; screenshots go to ``test-artifacts/``, and with
``DOCS_SCREENSHOTS=1`` those the docs show (``DOCS_SCREENSHOTS`` below) to ``docs/images``
too: ``DOCS_SCREENSHOTS=1 pytest tests/platform/test_ui.py`` takes them again."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from feeding import feed, wait_caught_up
from webserver_graphql import LOCATION, REPOSITORY, graphql, location_loaded

from pipelines.quality.suites import DATASETS
from sensors.hours import hour_key
from streaming.testing import LocalKafkaCluster, free_port

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
REPO_PATH = f"{REPOSITORY}@{LOCATION}"
DOCS_IMAGES = REPO / "docs" / "images"
#: the pages visited for their screenshots only (the run pages, the streams group): each
#: load of the UI's heavy front end costs chromium and the webserver seconds of CPU, so a CI
#: run skips them; ``UI_SCREENSHOTS=all`` or ``DOCS_SCREENSHOTS=1`` visits them
EVERY_PAGE = os.environ.get("UI_SCREENSHOTS") == "all" or os.environ.get("DOCS_SCREENSHOTS") == "1"
#: screenshot in test-artifacts/ -> the docs image it becomes under DOCS_SCREENSHOTS=1 (a CI
#: run leaves the docs alone)
DOCS_SCREENSHOTS = {
    "dagster-lineage-topic-to-mart.png": "lineage-topic-to-mart.png",
    "dagster-streaming-asset.png": "streaming-asset.png",
    "dagster-backfill.png": "backfill.png",
}
#: the mart whose upstream lineage reaches back to its Kafka topic
MART = "dbt/daily_revenue_by_region"
HOUR_MS = 3_600_000
# two complete hours of data (a range for the backfill), entirely in the past of the data
# fed after them (the topics keep records this recent)
T0 = (int(time.time() * 1000) // HOUR_MS - 3) * HOUR_MS
HOURS = [hour_key(T0 + i * HOUR_MS) for i in range(2)]
RECONCILIATION_CHECKS = {
    f"{name}_stream_matches_batch"
    for name in ("revenue_5m", "revenue_hopping", "fraud_alerts", "click_sessions")
}
GX_CHECKS = {f"gx_{dataset.replace('-', '_')}" for dataset in DATASETS}
# sensors that launch hourly runs on their own: stopped (PLATFORM_AUTOMATION=off), so the
# backfill's runs are the only ones building the hours (and the 2 cores are not shared with
# more Spark sessions)
RUN_LAUNCHING_SENSORS = ("stream_watermark_sensor", "late_data_sensor", "dbt_after_the_lake")
FINISHED = ("SUCCESS", "FAILURE", "CANCELED")


class _Phases:
    """How long each phase of the UI test took, printed and kept in test-artifacts/."""

    def __init__(self) -> None:
        self.started = self.last = time.monotonic()
        self.lines: list[str] = []

    def done(self, name: str) -> None:
        now = time.monotonic()
        self.lines.append(f"{now - self.last:7.1f} s  {name}")
        self.last = now

    def write(self) -> None:
        self.lines.append(f"{time.monotonic() - self.started:7.1f} s  in all")
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "ui-test-phases.txt").write_text("\n".join(self.lines) + "\n")
        print("\n".join(self.lines))


@pytest.fixture(scope="module")
def broker() -> Iterator[LocalKafkaCluster]:
    # its own broker: the fixed platform topic names must start empty
    with LocalKafkaCluster(nodes=1) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def dagster_ui(broker, tmp_path_factory) -> Iterator[dict[str, str]]:
    from pipelines.generator import GeneratorConfig, iter_events
    from pipelines.streams.supervisor import RunnerSettings, Supervisor
    from pipelines.topics import create_topics
    from streaming.dsl.processors.window_aggregate import (
        EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION as EMIT_INTERVAL,
    )

    bootstrap = broker.bootstrap_servers
    create_topics(bootstrap)
    home = tmp_path_factory.mktemp("dagster-home")
    shutil.copyfile(REPO / "platform" / "dagster.yaml", home / "dagster.yaml")
    state = tmp_path_factory.mktemp("state")
    # the stream applications, as `make run` runs them (status under <state>/supervisor,
    # where the health sensor reads it); final windows emitted as soon as they close
    supervisor = Supervisor(RunnerSettings(bootstrap, state_root=state, extra={EMIT_INTERVAL: 0}))
    supervisor.start()
    port = free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "STREAM_STATE_DIR": str(state),
        "LAKE_ROOT": str(tmp_path_factory.mktemp("lake")),
        "PLATFORM_PARTITIONS_START": hour_key(T0 - 2 * HOUR_MS),
        # the schedules and the dbt automation stay stopped: the test launches every run
        "PLATFORM_AUTOMATION": "off",
        "GX_ANALYTICS_ENABLED": "false",
        "PYTHONPATH": str(REPO),
    }
    dg = str(Path(sys.executable).with_name("dg"))
    proc = None
    try:
        proc = subprocess.Popen(
            [dg, "dev", "-w", "workspace.yaml", "-p", str(port), "-h", "127.0.0.1"],
            cwd=REPO,
            env=env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        # two hours of events, paced so the applications keep up (nothing dropped as
        # late but the generator's injected late orders), fed while dg dev loads: with
        # PLATFORM_AUTOMATION=off no sensor launches a run of the fed hours meanwhile
        gen = GeneratorConfig(
            seed=11,
            start_ms=T0,
            duration_s=2 * 3600 - 90,
            orders_per_second=0.5,
            customers=60,
        )
        started = time.monotonic()
        produced = feed(bootstrap, list(iter_events(gen)), T0)
        print(f"\nfed {produced} events in {time.monotonic() - started:.0f}s")
        deadline = time.monotonic() + 420
        reloads: list[str] = []
        while time.monotonic() < deadline:
            assert proc.poll() is None, "dg dev exited"
            try:
                if requests.get(f"{url}/server_info", timeout=2).ok and location_loaded(
                    url, reloads
                ):
                    break
            except requests.RequestException:
                pass
            time.sleep(1)
        else:
            raise AssertionError("the Dagster UI did not come up in 420 s")
        for name in RUN_LAUNCHING_SENSORS:
            assert _sensor_status(url, name) == "STOPPED", name
        yield {"url": url, "bootstrap": bootstrap}
    finally:
        teardown = []
        began = time.monotonic()
        if proc is not None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                left = subprocess.run(
                    ["ps", "-o", "pid,etime,args", "-g", str(proc.pid)],
                    capture_output=True,
                    text=True,
                ).stdout
                teardown.append(f"dg dev did not stop on SIGINT in 60 s; its group:\n{left}")
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # run workers and code servers
        teardown.append(f"{time.monotonic() - began:7.1f} s  dg dev stopped")
        began = time.monotonic()
        supervisor.close(90)
        teardown.append(f"{time.monotonic() - began:7.1f} s  stream applications stopped")
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "ui-test-teardown.txt").write_text("\n".join(teardown) + "\n")


def _sensor_status(url: str, name: str) -> str:
    sensor = graphql(
        url,
        "query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) { __typename "
        "... on Sensor { id sensorState { status } } } }",
        {
            "s": {
                "repositoryName": REPOSITORY,
                "repositoryLocationName": LOCATION,
                "sensorName": name,
            }
        },
    )["sensorOrError"]
    assert sensor["__typename"] == "Sensor", sensor
    return sensor["sensorState"]["status"]


def _screenshot(page: Any, name: str, *, full_page: bool = False) -> None:
    """The page into ``test-artifacts/<name>``, and into the docs when they show it and
    ``DOCS_SCREENSHOTS=1`` asks for it."""
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=full_page)
    if os.environ.get("DOCS_SCREENSHOTS") == "1" and name in DOCS_SCREENSHOTS:
        shutil.copyfile(path, DOCS_IMAGES / DOCS_SCREENSHOTS[name])


def _visit_for_screenshot(page: Any, url: str, name: str, *, full_page: bool = False) -> None:
    """Open ``url`` for its screenshot only, when every page is asked for (``EVERY_PAGE``)."""
    if EVERY_PAGE:
        page.goto(url, wait_until="networkidle")
        _screenshot(page, name, full_page=full_page)


def _park(page: Any) -> None:
    """Leave the UI for a blank page while the test waits on a run through GraphQL: an open
    Dagster page polls the webserver for live data every 2 s, keeping the renderer and the
    webserver busy for nothing meanwhile."""
    page.goto("about:blank")


def _run_ids(url: str) -> set[str]:
    runs = graphql(url, "{ runsOrError(limit: 50) { ... on Runs { results { runId } } } }")
    return {r["runId"] for r in runs["runsOrError"]["results"]}


def _button(page: Any, text: str) -> Any:
    """The first button whose visible text is ``text`` (icons make the accessible names
    differ)."""
    return page.get_by_role("button").filter(has_text=re.compile(rf"^\s*{text}\s*$")).first


def _new_run(url: str, before: set[str], timeout: float = 120, page: Any = None) -> str:
    """The id of the run launched since ``before`` was taken (exactly one); with ``page``,
    the launch's confirmation dialogs are confirmed meanwhile."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if page is not None:
            confirm = (
                page.get_by_role("dialog")
                .get_by_role("button")
                .filter(has_text=re.compile(r"^\s*Confirm\s*$"))
            )
            if confirm.count():
                with contextlib.suppress(Exception):  # the dialog closed meanwhile
                    confirm.first.click(timeout=5_000)
        new = _run_ids(url) - before
        if new:
            assert len(new) == 1, new
            return new.pop()
        time.sleep(1)
    raise AssertionError(f"no run was launched from the UI in {timeout}s")


def _run_status(url: str, run_id: str) -> str:
    data = graphql(
        url,
        "query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }",
        {"id": run_id},
    )
    return data["runOrError"]["status"]


def _wait_run(url: str, run_id: str, timeout: float = 300) -> str:
    deadline = time.monotonic() + timeout
    status = None
    while time.monotonic() < deadline:
        status = _run_status(url, run_id)
        if status in FINISHED:
            return status
        time.sleep(2)
    return f"timeout ({status})"


def _events(url: str, run_id: str) -> list[dict[str, Any]]:
    """Every event of the run (type, step, check evaluations)."""
    events: list[dict[str, Any]] = []
    cursor = None
    while True:
        data = graphql(
            url,
            "query($id: ID!, $c: String) { runOrError(runId: $id) { ... on Run { "
            "eventConnection(afterCursor: $c) { cursor hasMore events { __typename "
            "... on MessageEvent { message } "
            "... on ExecutionStepFailureEvent { error { message } } "
            "... on AssetCheckEvaluationEvent { evaluation { checkName success description "
            "assetKey { path } } } } } } } }",
            {"id": run_id, "c": cursor},
        )["runOrError"]["eventConnection"]
        events.extend(data["events"])
        cursor = data["cursor"]
        if not data["hasMore"]:
            return events


def _executed(url: str, run_id: str) -> str:
    """How the run's steps were executed, read from its executor's engine event."""
    messages = [e.get("message") or "" for e in _events(url, run_id)]
    if any(m.startswith("Executing steps in process") for m in messages):
        return "in process"
    if any(m.startswith("Executing steps using multiprocess executor") for m in messages):
        return "per step"
    return "unknown"


def _latest_observation(url: str, key: list[str], run_id: str) -> str:
    """The timestamp (ms, as the UI's asset events take it) of the latest observation of
    ``key`` that run ``run_id`` reported."""
    asset = graphql(
        url,
        "query($k: AssetKeyInput!) { assetOrError(assetKey: $k) { ... on Asset { "
        "assetObservations(limit: 100) { timestamp runId } } } }",
        {"k": {"path": key}},
    )["assetOrError"]
    stamps = [o["timestamp"] for o in asset["assetObservations"] if o["runId"] == run_id]
    assert stamps, f"no observation of {key} by run {run_id}"
    return max(stamps, key=int)


def _step_failures(url: str, run_id: str) -> list[tuple[str | None, str]]:
    """The run's step failures: their message and the end of their error."""
    return [
        (e.get("message"), (e.get("error") or {}).get("message", "")[-1500:])
        for e in _events(url, run_id)
        if e["__typename"] == "ExecutionStepFailureEvent"
    ]


def _check_results(url: str, run_id: str) -> dict[str, dict[str, Any]]:
    """The asset check evaluations of a run by check name."""
    return {
        e["evaluation"]["checkName"]: e["evaluation"]
        for e in _events(url, run_id)
        if e["__typename"] == "AssetCheckEvaluationEvent"
    }


def _asset_keys(url: str, group: str) -> list[list[str]]:
    nodes = graphql(
        url,
        "query($g: AssetGroupSelector!) { assetNodes(group: $g) { assetKey { path } } }",
        {
            "g": {
                "groupName": group,
                "repositoryName": REPOSITORY,
                "repositoryLocationName": LOCATION,
            }
        },
    )["assetNodes"]
    assert nodes, f"no {group} assets in the code location"
    return [n["assetKey"]["path"] for n in nodes]


def _wait_backfill(url: str, backfill_id: str, timeout: float = 1200) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    backfill: dict[str, Any] = {}
    while time.monotonic() < deadline:
        backfill = graphql(
            url,
            "query($id: String!) { partitionBackfillOrError(backfillId: $id) { "
            "... on PartitionBackfill { status runs { runId status "
            "assetSelection { path } tags { key value } } } } }",
            {"id": backfill_id},
        )["partitionBackfillOrError"]
        if backfill["status"] in (
            "COMPLETED",
            "COMPLETED_SUCCESS",
            "FAILED",
            "COMPLETED_FAILED",
            "CANCELED",
        ):
            return backfill
        time.sleep(3)
    raise AssertionError(f"backfill not finished in {timeout}s: {backfill}")


# dg dev's start, the two hours fed, the lake and the backfill: 5-8 minutes (each phase's
# time is in test-artifacts/ui-test-phases.txt)
@pytest.mark.timeout(1800)
def test_ui_generator_streaming_asset_backfill_and_checks(dagster_ui) -> None:
    from playwright.sync_api import expect, sync_playwright

    url, bootstrap = dagster_ui["url"], dagster_ui["bootstrap"]
    ARTIFACTS.mkdir(exist_ok=True)
    phases = _Phases()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        # the global asset graph: lineage from the raw topics to the marts, by group
        page.goto(f"{url}/asset-groups", wait_until="networkidle")
        for group in ("kafka_raw", "streams", "lake", "batch", "reconciliation", "dbt"):
            page.get_by_text(group, exact=True).first.wait_for(timeout=60_000)
        _screenshot(page, "dagster-asset-graph.png", full_page=True)
        # the streaming assets' group: its members through GraphQL (zoomed to fit the
        # group's eleven assets the graph draws nodes without labels)
        streams = graphql(
            url,
            "query($s: AssetGroupSelector!) { assetNodes(group: $s) { assetKey { path } } }",
            {
                "s": {
                    "groupName": "streams",
                    "repositoryName": REPOSITORY,
                    "repositoryLocationName": LOCATION,
                }
            },
        )["assetNodes"]
        assert ["kafka", "revenue-per-region-5m"] in [n["assetKey"]["path"] for n in streams]
        _visit_for_screenshot(
            page,
            f"{url}/locations/{REPO_PATH}/asset-groups/streams",
            "dagster-streams-group.png",
            full_page=True,
        )
        phases.done("asset graph pages")

        # (1a) the generator launched from the UI: the raw-topics group's "Materialize all"
        # (a burst of events ending now: stream time passes the fed hours, their last
        # windows close)
        before = _run_ids(url)
        page.goto(f"{url}/locations/{REPO_PATH}/asset-groups/kafka_raw", wait_until="networkidle")
        page.get_by_role("button", name="Materialize all").first.click(timeout=60_000)
        run_id = _new_run(url, before, page=page)
        _park(page)
        status = _wait_run(url, run_id)
        assert status == "SUCCESS", (status, _step_failures(url, run_id))
        _visit_for_screenshot(page, f"{url}/runs/{run_id}", "dagster-materialization-run.png")
        phases.done("generator run from the UI")

        # (1b) a streaming asset launched from its asset page, running until terminated
        before = _run_ids(url)
        page.goto(f"{url}/assets/kafka/revenue-per-region-5m", wait_until="networkidle")
        _button(page, "Materialize").click(timeout=60_000)
        # the multi-asset's other outputs (and, were they missing, upstream assets) are
        # confirmed in dialogs before the run is launched
        stream_run = _new_run(url, before, page=page)
        _park(page)
        deadline = time.monotonic() + 300
        observed = False
        while not observed and time.monotonic() < deadline:
            status = _run_status(url, stream_run)
            assert status not in FINISHED, f"the streaming run ended {status} by itself"
            observed = status == "STARTED" and any(
                e["__typename"] == "ObservationEvent" for e in _events(url, stream_run)
            )
            if not observed:
                time.sleep(2)
        assert observed, "the streaming run reported no observation in 300 s"
        # the streaming asset's events while its run reports, the run's latest observation
        # open (throughput, lag, closed windows, health)
        observed_at = _latest_observation(url, ["kafka", "revenue-per-region-5m"], stream_run)
        page.goto(
            f"{url}/assets/kafka/revenue-per-region-5m?view=events&time={observed_at}",
            wait_until="networkidle",
        )
        page.get_by_text("records_per_second", exact=True).first.wait_for(timeout=60_000)
        _screenshot(page, "dagster-streaming-asset.png")
        page.goto(f"{url}/runs/{stream_run}", wait_until="networkidle")
        _screenshot(page, "dagster-streaming-run.png")
        _button(page, "Terminate").click(timeout=60_000)
        # the confirmation dialog: "Terminate 1 run"
        page.get_by_role("dialog").get_by_role("button").filter(
            has_text=re.compile(r"^\s*Terminate")
        ).first.click(timeout=60_000)
        assert _wait_run(url, stream_run, timeout=180) == "CANCELED"
        _park(page)
        failed = [
            e for e in _events(url, stream_run) if e["__typename"] == "ExecutionStepFailureEvent"
        ]
        assert not failed, failed
        assert _executed(url, stream_run) == "per step", "a streaming run has its step process"
        _visit_for_screenshot(
            page, f"{url}/runs/{stream_run}", "dagster-streaming-run-canceled.png"
        )
        phases.done("streaming run started and terminated")

        # (2) the lake landed from the UI: the lake group's "Materialize all"; the Great
        # Expectations checks of the lake assets run with them, and pass on the fresh data
        wait_caught_up(bootstrap)  # every result of the fed hours is in the topics
        phases.done("stream applications caught up")
        before = _run_ids(url)
        page.goto(f"{url}/locations/{REPO_PATH}/asset-groups/lake", wait_until="networkidle")
        page.get_by_role("button", name="Materialize all").first.click(timeout=60_000)
        lake_run = _new_run(url, before, page=page)
        _park(page)
        assert _wait_run(url, lake_run, timeout=900) == "SUCCESS"
        _visit_for_screenshot(page, f"{url}/runs/{lake_run}", "dagster-lake-run.png")
        phases.done("lake run from the UI")
        assert _executed(url, lake_run) == "in process"  # one process for the 16 steps
        gx = {n: c for n, c in _check_results(url, lake_run).items() if n in GX_CHECKS}
        assert set(gx) == GX_CHECKS, gx
        for name, check in gx.items():
            assert check["success"], (name, check["description"])

        # (3) a range backfill of the two fed hours of the batch + reconciliation groups
        # (the hourly job's partitioned part; the lake is landed): one run for the range,
        # as their single-run backfill policy says. With the unpartitioned lake assets in
        # the same backfill, the batch assets would start in several runs, each as soon as
        # its lake parents landed.
        selection = [
            {"path": key}
            for group in ("batch", "reconciliation")
            for key in _asset_keys(url, group)
        ]
        result = graphql(
            url,
            "mutation($p: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $p) "
            "{ __typename ... on LaunchBackfillSuccess { backfillId } "
            "... on PythonError { message } } }",
            {"p": {"assetSelection": selection, "partitionNames": HOURS, "fromFailure": False}},
        )["launchPartitionBackfill"]
        assert result["__typename"] == "LaunchBackfillSuccess", result
        backfill_id = result["backfillId"]
        _park(page)
        backfill = _wait_backfill(url, backfill_id)
        phases.done("backfill of two hours (batch + reconciliation)")
        # the backfill's page: its partition range, status and each asset's partitions
        page.goto(f"{url}/runs/b/{backfill_id}", wait_until="networkidle")
        page.get_by_text("Partition selection", exact=True).first.wait_for(timeout=60_000)
        page.get_by_text("stream_vs_batch").first.wait_for(timeout=60_000)
        _screenshot(page, "dagster-backfill.png")
        runs = backfill["runs"]
        print("backfill runs:", [(r["runId"][:8], r["status"], r["assetSelection"]) for r in runs])
        assert backfill["status"] in ("COMPLETED", "COMPLETED_SUCCESS"), backfill
        assert len(runs) == 1, runs  # the single-run backfill policy: one run for the range
        run = runs[0]
        checks = _check_results(url, run["runId"])
        for name, check in sorted(checks.items()):
            print(name, "passed" if check["success"] else "FAILED", check["description"])
        failures = _step_failures(url, run["runId"])
        failed_checks = {n: c["description"] for n, c in checks.items() if not c["success"]}
        assert run["status"] == "SUCCESS", (run["status"], failures, failed_checks)
        assert {tuple(k["path"]) for k in run["assetSelection"]} == {
            tuple(k["path"]) for k in selection
        }, run["assetSelection"]
        assert _executed(url, run["runId"]) == "in process"  # one Spark session
        tags = {t["key"]: t["value"] for t in run["tags"]}
        assert tags.get("dagster/asset_partition_range_start") == HOURS[0], tags
        assert tags.get("dagster/asset_partition_range_end") == HOURS[-1], tags

        # the reconciliation checks of the range passed, every hour with data
        reconciled = {n: c for n, c in checks.items() if n in RECONCILIATION_CHECKS}
        assert set(reconciled) == RECONCILIATION_CHECKS, checks
        for name, check in sorted(reconciled.items()):
            assert check["success"], (name, check["description"])
            assert "no data" not in (check["description"] or ""), (name, check["description"])
        _visit_for_screenshot(page, f"{url}/runs/{run['runId']}", "dagster-backfill-run.png")

        # the lineage of a mart, upstream to its Kafka topic (lake, dbt staging, the mart)
        page.goto(
            f"{url}/assets/{MART}?view=lineage&lineageScope=upstream&lineageDepth=5",
            wait_until="networkidle",
        )
        for group in ("kafka_raw", "lake", "dbt"):
            page.get_by_text(group, exact=True).first.wait_for(timeout=60_000)
        page.get_by_text(MART.rsplit("/", 1)[1], exact=True).first.wait_for(timeout=60_000)
        # the nodes' latest events loaded (the topic and the lake table were materialized)
        page.get_by_text("Materialized", exact=True).first.wait_for(timeout=60_000)
        expect(page.get_by_text(re.compile(r"^\s*Loading"))).to_have_count(0, timeout=60_000)
        _screenshot(page, "dagster-lineage-topic-to-mart.png")
        phases.done("lineage page")
        browser.close()
    phases.write()
