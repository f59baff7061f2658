import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.Map;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.CogroupedKStream;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.KeyValueMapper;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.WindowStore;

/** Conformance families for GlobalKTable joins, cogroup and repartition topologies; twins of tests/conformance/fam_more.py. */
final class MoreFamilies {
    private MoreFamilies() {}

    /** Build {@code family} into {@code b} if it is one of ours; false otherwise. */
    static boolean build(String family, StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        switch (family) {
            case "global_join" -> globalJoin(b, p, outs);
            case "cogroup" -> cogroup(b, p, outs);
            case "repartition" -> repartition(b, p, outs);
            default -> {
                return false;
            }
        }
        return true;
    }

    static Long times10(Long v) {
        return v == null ? null : v * 10;
    }

    static String mod2(Long v) {
        return v == null ? null : String.valueOf(Math.floorMod(v, 2L));
    }

    // ---------------------------------------------------------------- 1. global join

    static KeyValueMapper<String, Long, String> selector(String kind) {
        return switch (kind) {
            case "key" -> (k, v) -> k;
            case "mod3" -> (k, v) -> Families.mod3(v);
            case "null_for_b" -> (k, v) -> "b".equals(k) ? null : k;
            default -> throw new IllegalArgumentException("selector " + kind);
        };
    }

    static void globalJoin(StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        KStream<String, Long> s = Families.input(b, "stream");
        GlobalKTable<String, Long> g = p.path("materialized").asBoolean(false)
                ? b.globalTable("global", Consumed.with(Families.S, Families.L), Families.kv("global-store", p))
                : b.globalTable("global", Consumed.with(Families.S, Families.L));
        KeyValueMapper<String, Long, String> selector = selector(Families.str(p, "selector"));
        KStream<String, Long> r = Families.str(p, "kind").equals("inner")
                ? s.join(g, selector, (Long v, Long gv) -> v * 100 + gv)
                : s.leftJoin(g, selector,
                        (String k, Long v, Long gv) -> (k == null ? 7L : 0L) + v * 100 + (gv == null ? 99L : gv));
        Families.toOut(r, "out", outs);
    }

    // ---------------------------------------------------------------- 2. cogroup

    static void cogroup(StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        KStream<String, Long> s1 = Families.input(b, "in1");
        String rekey = Families.str(p, "rekey");
        KGroupedStream<String, Long> g1 = switch (rekey) {
            case "none" -> s1.groupByKey(Grouped.with(Families.S, Families.L));
            case "generated" -> s1.groupBy((k, v) -> Families.mod3(v), Grouped.with(Families.S, Families.L));
            default -> s1.groupBy((k, v) -> Families.mod3(v), Grouped.with("regroup", Families.S, Families.L));
        };
        KGroupedStream<String, Long> g2 = Families.input(b, "in2").groupByKey(Grouped.with(Families.S, Families.L));
        CogroupedKStream<String, Long> c = g1.<Long>cogroup((k, v, a) -> Families.plus(a, v))
                .cogroup(g2, (k, v, a) -> Families.plus(a, times10(v)));
        String kind = Families.str(p, "windows");
        long size = Families.num(p, "size");
        boolean hasGrace = Families.has(p, "grace");
        long grace = Families.grace(p);
        if (kind.equals("none")) {
            Families.toOut(c.aggregate(() -> 0L, Families.kv("cog-store", p)).toStream(), "out", outs);
            return;
        }
        KTable<Windowed<String>, Long> t;
        switch (kind) {
            case "tumbling" -> {
                TimeWindows w = hasGrace
                        ? TimeWindows.ofSizeAndGrace(Duration.ofMillis(size), Duration.ofMillis(grace))
                        : TimeWindows.ofSizeWithNoGrace(Duration.ofMillis(size));
                Materialized<String, Long, WindowStore<Bytes, byte[]>> m =
                        Families.windowed("cog-store", p, size + grace);
                t = c.windowedBy(w).aggregate(() -> 0L, m);
            }
            case "sliding" -> {
                SlidingWindows w = hasGrace
                        ? SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(size), Duration.ofMillis(grace))
                        : SlidingWindows.ofTimeDifferenceWithNoGrace(Duration.ofMillis(size));
                Materialized<String, Long, WindowStore<Bytes, byte[]>> m =
                        Families.windowed("cog-store", p, 2 * size + grace);
                t = c.windowedBy(w).aggregate(() -> 0L, m);
            }
            case "session" -> {
                SessionWindows w = hasGrace
                        ? SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(size), Duration.ofMillis(grace))
                        : SessionWindows.ofInactivityGapWithNoGrace(Duration.ofMillis(size));
                Materialized<String, Long, SessionStore<Bytes, byte[]>> m =
                        Families.windowed("cog-store", p, size + grace);
                t = c.windowedBy(w).aggregate(() -> 0L, (k, a1, a2) -> Families.plus(a1, a2), m);
            }
            default -> throw new IllegalArgumentException("windows " + kind);
        }
        if (Families.str(p, "emit").equals("suppress")) {
            t = t.suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()));
        }
        if (kind.equals("session")) {
            t.toStream().to("out", Produced.with(WindowedSerdes.sessionWindowedSerdeFrom(String.class), Families.L));
            outs.put("out", "session");
        } else {
            t.toStream().to("out", Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, size), Families.L));
            outs.put("out", "time:" + size);
        }
    }

    // ---------------------------------------------------------------- 3. repartition

    static Grouped<String, Long> grouped(boolean named, String name) {
        return named ? Grouped.with(name, Families.S, Families.L) : Grouped.with(Families.S, Families.L);
    }

    static void repartition(StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        KStream<String, Long> s = Families.input(b, "input");
        boolean named = p.path("named").asBoolean(false);
        switch (Families.str(p, "variant")) {
            case "select_key_repartition" -> {
                Repartitioned<String, Long> rp = named
                        ? Repartitioned.<String, Long>as("rp").withKeySerde(Families.S).withValueSerde(Families.L)
                        : Repartitioned.with(Families.S, Families.L);
                KTable<String, Long> r = s.selectKey((k, v) -> Families.mod3(v)).repartition(rp).groupByKey()
                        .count(Families.kv("cnt-store", p));
                Families.toOut(r.toStream(), "out", outs);
            }
            case "group_by_twice" -> {
                KTable<String, Long> r1 = s.groupBy((k, v) -> Families.mod3(v), grouped(named, "first"))
                        .reduce(Families::plus, Families.kv("r1", p));
                KTable<String, Long> r2 = r1.toStream().groupBy((k, v) -> mod2(v), grouped(named, "second"))
                        .reduce(Families::plus, Families.kv("r2", p));
                Families.toOut(r2.toStream(), "out", outs);
            }
            case "shared_grouping" -> {
                KGroupedStream<String, Long> g = s.selectKey((k, v) -> Families.mod3(v)).groupByKey(grouped(named, "grp"));
                Families.toOut(g.count(Families.kv("c1", p)).toStream(), "out", outs);
                Families.toOut(g.reduce(Families::plus, Families.kv("c2", p)).toStream(), "out2", outs);
            }
            case "to_table_group_by" -> {
                KTable<String, Long> t = s.selectKey((k, v) -> Families.mod3(v)).toTable(Families.kv("t1", p));
                KTable<String, Long> r = t.groupBy((k, v) -> KeyValue.pair(mod2(v), v), grouped(named, "tg"))
                        .reduce(Families::plus, Families::minus, Families.kv("r2", p));
                Families.toOut(r.toStream(), "out", outs);
                KTable<String, Long> c3 = s.map((k, v) -> KeyValue.pair(Families.mod3(v), v))
                        .groupByKey(Grouped.with(Families.S, Families.L))
                        .count(Families.kv("c3", p));
                Families.toOut(c3.toStream(), "out2", outs);
            }
            default -> throw new IllegalArgumentException("variant " + Families.str(p, "variant"));
        }
    }
}
