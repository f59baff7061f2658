import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.Map;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindowedKStream;
import org.apache.kafka.streams.kstream.UnlimitedWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.kstream.Windows;
import org.apache.kafka.streams.kstream.internals.TimeWindow;
import org.apache.kafka.streams.state.WindowStore;

/**
 * Conformance families of the parity rules: null keys through explicit repartitions before
 * joins (KIP-962), custom {@code Windows} and {@code UnlimitedWindows}; twins of
 * tests/conformance/fam_parity.py.
 */
final class ParityFamilies {
    private ParityFamilies() {}

    static boolean build(String family, StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        switch (family) {
            case "null_key_join" -> nullKeyJoin(b, p, outs);
            case "custom_windows" -> customWindows(b, p, outs);
            default -> {
                return false;
            }
        }
        return true;
    }

    // ---------------------------------------------------------------- null keys and joins

    static void nullKeyJoin(StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        KTable<String, Long> table = b.table("table", Consumed.with(Families.S, Families.L));
        KStream<String, Long> right = Families.input(b, "right");
        KStream<String, Long> left = Families.input(b, "left")
                .selectKey((k, v) -> Families.mod3(v))
                .repartition(Repartitioned.with(Families.S, Families.L).withName("rp"));
        if (p.path("map_after").asBoolean(false)) {
            left = left.mapValues(v -> v == null ? null : v + 1);
        }
        JoinWindows windows = JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofMillis(Families.num(p, "window")));
        StreamJoined<String, Long, Long> sj = StreamJoined.with(Families.S, Families.L, Families.L);
        KStream<String, Long> joined = switch (Families.str(p, "kind")) {
            case "stream_table_inner" -> left.join(table, StreamJoinFamilies.JOINER);
            case "stream_table_left" -> left.leftJoin(table, StreamJoinFamilies.JOINER);
            case "stream_stream_inner" -> left.join(right, StreamJoinFamilies.JOINER, windows, sj);
            case "stream_stream_left" -> left.leftJoin(right, StreamJoinFamilies.JOINER, windows, sj);
            case "stream_stream_outer" -> left.outerJoin(right, StreamJoinFamilies.JOINER, windows, sj);
            default -> throw new IllegalArgumentException("kind " + Families.str(p, "kind"));
        };
        Families.toOut(joined, "out", outs);
    }

    // ---------------------------------------------------------------- custom windows

    /** Windows of {@code size} from {@code offset} on; before it, the window [0, offset). */
    static final class OffsetWindows extends Windows<TimeWindow> {
        private final long size;
        private final long offset;
        private final long grace;

        OffsetWindows(long size, long offset, long grace) {
            this.size = size;
            this.offset = offset;
            this.grace = grace;
        }

        @Override
        public Map<Long, TimeWindow> windowsFor(long timestamp) {
            if (timestamp < offset) {
                return Map.of(0L, new TimeWindow(0, offset));
            }
            long start = offset + Math.floorDiv(timestamp - offset, size) * size;
            return Map.of(start, new TimeWindow(start, start + size));
        }

        @Override
        public long size() {
            return size;
        }

        @Override
        public long gracePeriodMs() {
            return grace;
        }
    }

    static void customWindows(StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        long size;
        TimeWindowedKStream<String, Long> w;
        if (Families.str(p, "windows").equals("unlimited")) {
            size = Long.MAX_VALUE;
            UnlimitedWindows windows = UnlimitedWindows.of()
                    .startOn(java.time.Instant.ofEpochMilli(Families.num(p, "start")));
            w = Families.input(b, "input").groupByKey().windowedBy(windows);
        } else {
            size = Families.num(p, "size");
            w = Families.input(b, "input").groupByKey()
                    .windowedBy(new OffsetWindows(size, Families.num(p, "offset"), Families.num(p, "grace")));
        }
        Materialized<String, Long, WindowStore<Bytes, byte[]>> m = Materialized.as("win-store");
        if (p.path("store").asText("rocksdb").equals("in_memory")) {
            m = m.withStoreType(Materialized.StoreType.IN_MEMORY);
        }
        KTable<Windowed<String>, Long> t = switch (Families.str(p, "op")) {
            case "count" -> w.count(m);
            case "reduce" -> w.reduce(Families::plus, m);
            case "aggregate" -> w.aggregate(() -> 0L, (k, v, a) -> Families.plus(a, v), m);
            default -> throw new IllegalArgumentException("op " + Families.str(p, "op"));
        };
        if (Families.str(p, "emit").equals("suppress")) {
            t = t.suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()));
        }
        t.toStream().to("out", Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, size), Families.L));
        outs.put("out", "time:" + size);
    }
}
