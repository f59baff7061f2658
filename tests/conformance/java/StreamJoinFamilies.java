import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.Map;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.state.BuiltInDslStoreSuppliers;

/** Conformance families for KStream-KStream joins; twins of tests/conformance/fam_stream_joins.py. */
final class StreamJoinFamilies {
    private StreamJoinFamilies() {}

    /** Build {@code family} into {@code b} if it is one of ours; false otherwise. */
    static boolean build(String family, StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        switch (family) {
            case "stream_join" -> streamJoin(b, p, outs);
            default -> {
                return false;
            }
        }
        return true;
    }

    private static long nz(Long v) {
        return v == null ? -99L : v;
    }

    static final ValueJoiner<Long, Long, Long> JOINER = (l, r) -> nz(l) * 1000L + nz(r);

    static JoinWindows windows(JsonNode p) {
        Duration before = Duration.ofMillis(Families.num(p, "before"));
        JoinWindows w = Families.has(p, "grace")
                ? JoinWindows.ofTimeDifferenceAndGrace(before, Duration.ofMillis(Families.num(p, "grace")))
                : JoinWindows.ofTimeDifferenceWithNoGrace(before);
        return w.after(Duration.ofMillis(Families.num(p, "after")));
    }

    static void streamJoin(StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        KStream<String, Long> left = Families.input(b, "left");
        KStream<String, Long> right = Families.input(b, "right");
        String rekey = p.path("rekey").asText("none");
        if (rekey.equals("left") || rekey.equals("both")) {
            left = left.selectKey((k, v) -> Families.mod3(v));
        }
        if (p.path("self_join").asBoolean(false)) {
            right = left;
        } else if (rekey.equals("right") || rekey.equals("both")) {
            right = right.selectKey((k, v) -> Families.mod3(v));
        }
        StreamJoined<String, Long, Long> sj = StreamJoined.with(Families.S, Families.L, Families.L);
        if (p.path("store").asText("rocksdb").equals("in_memory")) {
            sj = sj.withDslStoreSuppliers(new BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers());
        }
        if (p.path("named").asBoolean(false)) {
            sj = sj.withName("sj").withStoreName("sjs");
        }
        KStream<String, Long> r = switch (Families.str(p, "kind")) {
            case "inner" -> left.join(right, JOINER, windows(p), sj);
            case "left" -> left.leftJoin(right, JOINER, windows(p), sj);
            case "outer" -> left.outerJoin(right, JOINER, windows(p), sj);
            default -> throw new IllegalArgumentException("kind " + Families.str(p, "kind"));
        };
        Families.toOut(r, "out", outs);
    }
}
