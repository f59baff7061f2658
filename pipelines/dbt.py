"""The platform's dbt project (dbt-duckdb over the Parquet lake) and how to point it at a
lake: a profile naming the DuckDB database, and the ``lake_root`` var its sources read."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import yaml
from dagster_dbt import DbtProject

DBT_PROJECT_DIR = Path(__file__).resolve().parents[1] / "dbt_project"
DBT_PROJECT = DbtProject(project_dir=DBT_PROJECT_DIR, profiles_dir=DBT_PROJECT_DIR)
PROFILE = "streamplatform"


def dbt_executable() -> str:
    """The ``dbt`` of this virtualenv (it need not be on ``PATH``), else ``dbt``."""
    local = Path(sys.executable).parent / "dbt"
    return str(local) if local.exists() else (shutil.which("dbt") or "dbt")


def write_profile(folder: Path, database: str) -> Path:
    """A ``profiles.yml`` in ``folder`` whose target builds the marts in ``database``."""
    folder.mkdir(parents=True, exist_ok=True)
    profile = {
        PROFILE: {
            "target": "platform",
            "outputs": {"platform": {"type": "duckdb", "path": database, "threads": 2}},
        }
    }
    # written aside and renamed: a concurrent run never reads a half-written file
    staged = folder / f".profiles.yml.{os.getpid()}.{threading.get_ident()}"
    staged.write_text(yaml.safe_dump(profile))
    staged.replace(folder / "profiles.yml")
    return folder


def build_args(lake: Path, database: str) -> list[str]:
    """``dbt build`` over ``lake``, the marts in ``database`` (profile under the lake)."""
    profiles = write_profile(lake / "_dbt", database)
    return [
        "build",
        "--profiles-dir",
        str(profiles),
        "--vars",
        orjson.dumps({"lake_root": str(lake)}).decode(),
    ]


def prepare_manifest() -> Path:
    """``dbt parse`` (offline) unless the manifest exists; returns the manifest path.

    Several processes may load the definitions at once (the webserver and the daemon, test
    workers): one parses under a lock, the others wait and read its manifest."""
    import fcntl

    manifest = DBT_PROJECT.manifest_path
    manifest.parent.mkdir(parents=True, exist_ok=True)
    with open(manifest.parent / ".parse.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not manifest.exists():
            subprocess.run(
                [
                    dbt_executable(),
                    "parse",
                    "--quiet",
                    "--project-dir",
                    str(DBT_PROJECT_DIR),
                    "--profiles-dir",
                    str(DBT_PROJECT_DIR),
                ],
                cwd=DBT_PROJECT_DIR,
                check=True,
            )
    return manifest
