"""The input script of Kafka's AbstractJoinIntegrationTest, shared by the ported
StreamTableJoinIntegrationTest and TableTableJoinIntegrationTest scenarios."""

LEFT, RIGHT = "inputTopicLeft", "inputTopicRight"
# (topic, value, timestamp); every record has key 0 (ANY_UNIQUE_KEY)
INPUT = [
    (LEFT, None, 1), (RIGHT, None, 2), (LEFT, "A", 3), (RIGHT, "a", 4), (LEFT, "B", 5),
    (RIGHT, "b", 6), (LEFT, None, 7), (RIGHT, None, 8), (LEFT, "C", 9), (RIGHT, "c", 10),
    (RIGHT, None, 11), (LEFT, None, 12), (RIGHT, None, 13),
    (RIGHT, "d", 7),  # out-of-order data with null as latest
    (LEFT, "D", 6), (LEFT, None, 2), (RIGHT, None, 3), (RIGHT, "e", 14), (LEFT, "E", 15),
    (LEFT, None, 10),  # out-of-order data with non-null as latest
    (RIGHT, None, 9), (LEFT, "F", 4), (RIGHT, "f", 3),
]  # fmt: skip
