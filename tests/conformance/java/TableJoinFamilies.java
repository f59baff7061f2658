import com.fasterxml.jackson.databind.JsonNode;
import java.util.Map;
import org.apache.kafka.streams.StreamsBuilder;

/** Conformance families for KStream-KTable (plain and versioned) and KTable-KTable joins; twins of tests/conformance/fam_*.py. */
final class TableJoinFamilies {
    private TableJoinFamilies() {}

    /** Build {@code family} into {@code b} if it is one of ours; false otherwise. */
    static boolean build(String family, StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        switch (family) {
            default -> {
                return false;
            }
        }
    }
}
