"""Foreign-key KTable-KTable joins: processors, wire formats and the murmur3 value hash."""
