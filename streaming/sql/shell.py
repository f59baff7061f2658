"""A small SQL shell for running applications: ``python -m streaming sql --shell --server URL``.

Reads statements (ending with ``;``) from standard input, POSTs each to the query server's
``/sql`` and prints the answer: a pull query's rows as a table, a push query's rows as they
arrive (JSON lines) until Ctrl-C, which ends that query and returns to the prompt.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from typing import Any, TextIO


def post(server: str, text: str, token: str | None = None, timeout: float | None = 30.0) -> Any:
    """The open HTTP response of POST ``server``/sql with ``text`` as the body."""
    headers = {"Content-Type": "text/plain; charset=utf-8"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        server.rstrip("/") + "/sql", data=text.encode(), headers=headers, method="POST"
    )
    return urllib.request.urlopen(request, timeout=timeout)


def format_rows(rows: list[dict[str, Any]]) -> str:
    """Rows as an aligned text table (columns of the first row first)."""
    if not rows:
        return "(no rows)"
    columns: list[str] = []
    for row in rows:
        columns.extend(c for c in row if c not in columns)
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = [" | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("-+-".join("-" * w for w in widths))
    lines.extend(" | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells)
    return "\n".join(lines)


def _cell(value: Any) -> str:
    return "NULL" if value is None else value if isinstance(value, str) else json.dumps(value)


def run_statement(server: str, text: str, out: TextIO, token: str | None = None) -> None:
    """Send one statement and print its answer (push queries until Ctrl-C)."""
    try:
        reply = post(server, text, token, timeout=None)
    except urllib.error.HTTPError as exc:
        body = exc.read().decode("utf-8", "replace")
        try:
            message = json.loads(body).get("error", body)
        except ValueError:
            message = body
        print(f"error ({exc.code}): {message}", file=out)
        return
    with reply:
        if reply.headers.get_content_type() == "application/x-ndjson":
            try:
                for line in reply:
                    print(line.decode().rstrip("\n"), file=out, flush=True)
            except KeyboardInterrupt:
                print("(push query ended)", file=out)
            return
        print(format_rows(json.loads(reply.read())), file=out)


def shell(server: str, *, token: str | None = None) -> int:
    """The read-send-print loop; ends at end of input or with ``quit;``."""
    import signal

    # Ctrl-C ends a push query or the current input, not the shell
    signal.signal(signal.SIGINT, signal.default_int_handler)
    interactive = sys.stdin.isatty()
    buffer = ""
    while True:
        try:
            line = (
                input("sql> " if not buffer else "...> ") if interactive else sys.stdin.readline()
            )
        except EOFError:
            break
        except KeyboardInterrupt:
            buffer = ""
            print()
            continue
        if not interactive and not line:
            break
        buffer += line + ("\n" if interactive else "")
        while ";" in buffer:
            statement, _, buffer = buffer.partition(";")
            if statement.strip().lower() in ("quit", "exit"):
                return 0
            if statement.strip():
                try:
                    run_statement(server, statement, sys.stdout, token)
                except urllib.error.URLError as exc:
                    print(f"cannot reach {server}: {exc.reason}", file=sys.stdout)
    return 0
