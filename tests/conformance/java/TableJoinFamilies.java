import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.Map;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KGroupedTable;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/** Conformance families for KStream-KTable (plain and versioned) joins and versioned tables; twins of tests/conformance/fam_table_joins.py. */
final class TableJoinFamilies {
    private TableJoinFamilies() {}

    /** Build {@code family} into {@code b} if it is one of ours; false otherwise. */
    static boolean build(String family, StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        switch (family) {
            case "stream_table_join" -> streamTableJoin(b, p, outs);
            case "versioned_table" -> versionedTable(b, p, outs);
            default -> {
                return false;
            }
        }
        return true;
    }

    static Materialized<String, Long, KeyValueStore<Bytes, byte[]>> versioned(String name, long history) {
        return Materialized.<String, Long>as(Stores.persistentVersionedKeyValueStore(name, Duration.ofMillis(history)))
                .withKeySerde(Families.S)
                .withValueSerde(Families.L);
    }

    static long tv(Long tv) {
        return tv == null ? 99L : tv;
    }

    // ---------------------------------------------------------------- 1. stream-table join

    static void streamTableJoin(StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        KStream<String, Long> s = Families.input(b, "stream");
        if (p.path("rekey").asBoolean(false)) {
            s = s.selectKey((k, v) -> k);
        }
        boolean grace = Families.has(p, "grace");
        if (grace) {
            s = s.filter((k, v) -> k != null);
        }
        String tableKind = Families.str(p, "table");
        KTable<String, Long> t;
        if (tableKind.equals("versioned")) {
            t = b.table("table", versioned("table-store", Families.num(p, "history")));
        } else if (tableKind.equals("materialized")) {
            t = b.table("table", Families.kv("table-store", p));
        } else {
            t = b.table("table", Consumed.with(Families.S, Families.L));
        }
        Joined<String, Long, Long> joined = Joined.with(Families.S, Families.L, Families.L);
        if (grace) {
            joined = joined.withGracePeriod(Duration.ofMillis(Families.num(p, "grace")));
        }
        KStream<String, Long> r;
        if (Families.str(p, "kind").equals("inner")) {
            r = s.join(t, (Long v, Long tv) -> v * 100 + tv(tv), joined);
        } else {
            r = s.leftJoin(t, (String k, Long v, Long tv) -> (k == null ? 7L : 0L) + v * 100 + tv(tv), joined);
        }
        Families.toOut(r, "out", outs);
    }

    // ---------------------------------------------------------------- 2. versioned table

    static void versionedTable(StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        KTable<String, Long> t = b.table("input", versioned("vt-store", Families.num(p, "history")));
        String variant = Families.str(p, "variant");
        if (variant.equals("to_stream")) {
            Families.toOut(t.toStream(), "out", outs);
            return;
        }
        KGroupedTable<String, Long> g = t.groupBy(
                (k, v) -> KeyValue.pair(Families.mod3(v), v), Grouped.with(Families.S, Families.L));
        KTable<String, Long> r;
        if (variant.equals("count")) {
            r = g.count(Families.kv("agg-store", p));
        } else {
            r = g.aggregate(() -> 0L, (k, v, a) -> Families.plus(a, v), (k, v, a) -> Families.minus(a, v),
                    Families.kv("agg-store", p));
        }
        Families.toOut(r.toStream(), "out", outs);
    }
}
