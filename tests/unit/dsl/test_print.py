"""``KStream.print(Printed...)``: Kafka's ``KStreamPrint`` line format ``[label]: key, value``
(``null`` for a missing key or value), the label defaulting to the processor's name."""

from __future__ import annotations

import pytest

from streaming import Printed, StreamsBuilder, TopologyTestDriver, serdes
from streaming.errors import TopologyException

S = serdes.String()


def _pipe(printed: Printed | None, records: list[tuple[str | None, str | None]]) -> None:
    builder = StreamsBuilder()
    builder.stream("in", key_serde=S, value_serde=S).print(printed)
    with TopologyTestDriver(builder.build()) as driver:
        source = driver.create_input_topic("in", S, S)
        for key, value in records:
            source.pipe_input(key, value)


def test_print_to_standard_output_labels_lines_with_the_processor_name(capsys):
    _pipe(Printed.to_sys_out(), [("a", "1"), (None, "2"), ("c", None)])
    assert capsys.readouterr().out.splitlines() == [
        "[KSTREAM-PRINTER-0000000001]: a, 1",
        "[KSTREAM-PRINTER-0000000001]: null, 2",
        "[KSTREAM-PRINTER-0000000001]: c, null",
    ]


def test_print_to_a_file_with_label_and_mapper(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old content\n")
    printed = (
        Printed.to_file(path).with_label("orders").with_key_value_mapper(lambda k, v: f"{k}={v}")
    )
    assert path.read_text() == ""  # emptied when the Printed is made, as Kafka does
    _pipe(printed, [("a", "1"), ("b", "2")])
    assert path.read_text().splitlines() == ["[orders]: a=1", "[orders]: b=2"]


def test_print_to_a_file_that_cannot_be_written(tmp_path):
    with pytest.raises(TopologyException, match="Unable to write stream to file"):
        Printed.to_file(tmp_path / "missing-dir" / "out.txt")
    with pytest.raises(ValueError, match="empty"):
        Printed.to_file(" ")
