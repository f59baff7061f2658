import com.fasterxml.jackson.databind.JsonNode;
import java.util.Map;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TableJoined;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * Conformance families for KTable-KTable joins, primary key ("table_join") and foreign key
 * ("fk_join"), and joins that read derived tables through their value getters ("table_view");
 * twins of tests/conformance/fam_foreign_key.py.
 */
final class ForeignKeyFamilies {
    private ForeignKeyFamilies() {}

    /** Build {@code family} into {@code b} if it is one of ours; false otherwise. */
    static boolean build(String family, StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        switch (family) {
            case "table_join" -> tableJoin(b, p, outs);
            case "fk_join" -> fkJoin(b, p, outs);
            case "table_view" -> tableView(b, p, outs);
            case "windowed_table_join" -> windowedTableJoin(b, p, outs);
            default -> {
                return false;
            }
        }
        return true;
    }

    static final ValueJoiner<Long, Long, Long> JOINER =
            (l, r) -> (l == null ? 1000L : l) * 1000L + (r == null ? 500L : r);

    static KTable<String, Long> table(StreamsBuilder b, String topic, String store, boolean mat, JsonNode p) {
        return mat
                ? b.table(topic, Consumed.with(Families.S, Families.L), Families.kv(store, p))
                : b.table(topic, Consumed.with(Families.S, Families.L));
    }

    static void after(KTable<String, Long> t, JsonNode p, Map<String, String> outs) {
        switch (Families.str(p, "after")) {
            case "none" -> { }
            case "filter" -> t = t.filter((k, v) -> Families.isEven(v));
            case "groupby" -> t = t
                    .groupBy((k, v) -> KeyValue.pair(Families.mod3(v), v), Grouped.with(Families.S, Families.L))
                    .reduce(Families::plus, Families::minus, Families.kv("gb-store", p));
            default -> throw new IllegalArgumentException("after " + Families.str(p, "after"));
        }
        Families.toOut(t.toStream(), "out", outs);
    }

    // ---------------------------------------------------------------- table_join

    static void tableJoin(StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        KTable<String, Long> left = table(b, "left", "left-store", p.get("left_mat").asBoolean(), p);
        KTable<String, Long> right = table(b, "right", "right-store", p.get("right_mat").asBoolean(), p);
        String filtered = Families.str(p, "filtered");
        if (filtered.equals("left")) {
            left = left.filter((k, v) -> Families.isEven(v));
        } else if (filtered.equals("right")) {
            right = right.filter((k, v) -> Families.isEven(v));
        }
        boolean named = p.get("named").asBoolean();
        boolean mat = p.get("join_mat").asBoolean();
        Materialized<String, Long, KeyValueStore<Bytes, byte[]>> m = Families.kv("join-store", p);
        Named n = Named.as("jn");
        KTable<String, Long> joined = switch (Families.str(p, "kind")) {
            case "inner" -> mat
                    ? (named ? left.join(right, JOINER, n, m) : left.join(right, JOINER, m))
                    : (named ? left.join(right, JOINER, n) : left.join(right, JOINER));
            case "left" -> mat
                    ? (named ? left.leftJoin(right, JOINER, n, m) : left.leftJoin(right, JOINER, m))
                    : (named ? left.leftJoin(right, JOINER, n) : left.leftJoin(right, JOINER));
            case "outer" -> mat
                    ? (named ? left.outerJoin(right, JOINER, n, m) : left.outerJoin(right, JOINER, m))
                    : (named ? left.outerJoin(right, JOINER, n) : left.outerJoin(right, JOINER));
            default -> throw new IllegalArgumentException("kind " + Families.str(p, "kind"));
        };
        after(joined, p, outs);
    }

    // ---------------------------------------------------------------- fk_join

    static String fkOf(Long v, boolean nullFk) {
        if (v == null || (nullFk && Math.floorMod(v, 4L) == 3L)) {
            return null;
        }
        return String.valueOf("abc".charAt((int) Math.floorMod(v, 3L)));
    }

    static void fkJoin(StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        KTable<String, Long> left = table(b, "left", "left-store", p.get("left_mat").asBoolean(), p);
        KTable<String, Long> right = table(b, "right", "right-store", false, p);
        if (p.get("right_filtered").asBoolean()) {
            right = right.filter((k, v) -> Families.isEven(v));
        }
        boolean nullFk = p.get("null_fk").asBoolean();
        boolean byValue = Families.str(p, "extractor").equals("value");
        boolean inner = Families.str(p, "kind").equals("inner");
        TableJoined<String, String> tj = p.get("named").asBoolean()
                ? TableJoined.as("fk")
                : TableJoined.with(null, null);
        Materialized<String, Long, KeyValueStore<Bytes, byte[]>> m = p.get("join_mat").asBoolean()
                ? Families.kv("fk-store", p)
                : Materialized.with(null, null);
        KTable<String, Long> result;
        if (byValue) {
            java.util.function.Function<Long, String> fk = v -> fkOf(v, nullFk);
            result = inner ? left.join(right, fk, JOINER, tj, m) : left.leftJoin(right, fk, JOINER, tj, m);
        } else {
            java.util.function.BiFunction<String, Long, String> fk = (k, v) -> fkOf(v, nullFk);
            result = inner ? left.join(right, fk, JOINER, tj, m) : left.leftJoin(right, fk, JOINER, tj, m);
        }
        after(result, p, outs);
    }

    // ---------------------------------------------------------------- table_view

    static void tableView(StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        String view = Families.str(p, "view");
        KTable<String, Long> r2 = table(b, "right2", "", false, p); // read by every view
        KTable<String, Long> other = switch (view) {
            case "map_values" -> table(b, "right", "", false, p).mapValues(v -> v * 10);
            case "filter_map" -> table(b, "right", "", false, p)
                    .filter((k, v) -> Families.isEven(v)).mapValues(v -> v + 1);
            case "join_inner", "join_left", "join_outer" -> {
                KTable<String, Long> r1 = table(b, "right", "", false, p);
                yield switch (view) {
                    case "join_inner" -> r1.join(r2, JOINER);
                    case "join_left" -> r1.leftJoin(r2, JOINER);
                    default -> r1.outerJoin(r2, JOINER);
                };
            }
            case "count", "suppress" -> {
                KTable<String, Long> c = b.stream("right", Consumed.with(Families.S, Families.L))
                        .groupByKey(Grouped.with(Families.S, Families.L))
                        .count(Families.kv("cnt-store", p));
                yield view.equals("suppress")
                        ? c.suppress(Suppressed.untilTimeLimit(java.time.Duration.ofMillis(10),
                                Suppressed.BufferConfig.unbounded()))
                        : c;
            }
            case "table_reduce" -> table(b, "right", "", false, p)
                    .groupBy((k, v) -> KeyValue.pair(k, v), Grouped.with(Families.S, Families.L))
                    .reduce(Families::plus, Families::minus, Families.kv("red-store", p));
            default -> throw new IllegalArgumentException("view " + view);
        };
        KTable<String, Long> left = table(b, "left", "", false, p);
        KTable<String, Long> joined = Families.str(p, "kind").equals("inner")
                ? left.join(other, JOINER)
                : left.leftJoin(other, JOINER);
        Families.toOut(joined.toStream(), "out", outs);
    }

    // ---------------------------------------------------------------- windowed_table_join

    static KTable<Windowed<String>, Long> windowedCounts(StreamsBuilder b, String topic, String store,
                                                        boolean session, JsonNode p) {
        KGroupedStream<String, Long> g = b.stream(topic, Consumed.with(Families.S, Families.L))
                .groupByKey(Grouped.with(Families.S, Families.L));
        return session
                ? g.windowedBy(SessionWindows.ofInactivityGapWithNoGrace(java.time.Duration.ofMillis(5)))
                        .count(Families.windowed(store, p, 5))
                : g.windowedBy(TimeWindows.ofSizeWithNoGrace(java.time.Duration.ofMillis(10)))
                        .count(Families.windowed(store, p, 10));
    }

    static void windowedTableJoin(StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        boolean session = Families.str(p, "window").equals("session");
        KTable<Windowed<String>, Long> left = windowedCounts(b, "left", "lw-store", session, p);
        KTable<Windowed<String>, Long> right = windowedCounts(b, "right", "rw-store", session, p);
        KTable<Windowed<String>, Long> joined = switch (Families.str(p, "kind")) {
            case "inner" -> left.join(right, JOINER);
            case "left" -> left.leftJoin(right, JOINER);
            default -> left.outerJoin(right, JOINER);
        };
        if (session) {
            joined.toStream().to("out", Produced.with(WindowedSerdes.sessionWindowedSerdeFrom(String.class), Families.L));
            outs.put("out", "session");
        } else {
            joined.toStream().to("out", Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, 10L), Families.L));
            outs.put("out", "time:10");
        }
    }
}
