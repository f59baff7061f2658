import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.WindowedSerdes;

/**
 * The windowed-aggregation workload of bench.windowed_agg in Apache Kafka Streams itself:
 * orders (JSON) -> selectKey(region) -> repartition -> 5-minute tumbling sum of the amount
 * (RocksDB, record cache) -> output (key = region + 8-byte window start, value = JSON number).
 * Prints READY right before start(); SIGTERM closes it (the JVM's shutdown hook).
 */
public final class WindowedAgg {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** A double as a JSON number (what the engine's orjson serde writes and reads). */
    static final class JsonDouble implements Serde<Double> {
        @Override
        public Serializer<Double> serializer() {
            return (topic, d) -> d == null ? null : Double.toString(d).getBytes(StandardCharsets.UTF_8);
        }

        @Override
        public Deserializer<Double> deserializer() {
            return (topic, b) -> b == null ? null : Double.parseDouble(new String(b, StandardCharsets.UTF_8));
        }
    }

    static JsonNode field(byte[] json, String name) {
        try {
            return JSON.readTree(json).get(name);
        } catch (java.io.IOException e) {
            throw new IllegalArgumentException(e);
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = null, input = null, output = null, group = null, guarantee = null;
        String stateDir = null;
        int commitMs = 100, threads = 1;
        long windowMs = 300_000, graceMs = 7_200_000;
        for (int i = 0; i < args.length; i += 2) {
            switch (args[i]) {
                case "--bootstrap" -> bootstrap = args[i + 1];
                case "--input" -> input = args[i + 1];
                case "--output" -> output = args[i + 1];
                case "--group" -> group = args[i + 1];
                case "--guarantee" -> guarantee = args[i + 1];
                case "--state-dir" -> stateDir = args[i + 1];
                case "--commit-interval-ms" -> commitMs = Integer.parseInt(args[i + 1]);
                case "--threads" -> threads = Integer.parseInt(args[i + 1]);
                case "--window-ms" -> windowMs = Long.parseLong(args[i + 1]);
                case "--grace-ms" -> graceMs = Long.parseLong(args[i + 1]);
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, group);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG,
                "eos".equals(guarantee) ? StreamsConfig.EXACTLY_ONCE_V2 : StreamsConfig.AT_LEAST_ONCE);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, commitMs);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, threads);

        Serde<String> strings = Serdes.String();
        Serde<Double> amounts = new JsonDouble();
        StreamsBuilder builder = new StreamsBuilder();
        // the same work as the Python runners: the whole JSON order goes through the
        // repartition topic, and the aggregator reads the amount from it
        builder.stream(input, Consumed.with(strings, Serdes.ByteArray()))
                .selectKey((key, value) -> field(value, "region").asText())
                .groupByKey(Grouped.with(strings, Serdes.ByteArray()))
                .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(windowMs), Duration.ofMillis(graceMs)))
                .aggregate(() -> 0.0, (region, value, sum) -> sum + field(value, "amount").asDouble(),
                        Materialized.<String, Double, org.apache.kafka.streams.state.WindowStore<org.apache.kafka.common.utils.Bytes, byte[]>>as("revenue-store")
                                .withKeySerde(strings).withValueSerde(amounts))
                .toStream()
                .to(output, Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, windowMs), amounts));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(60));
            closed.countDown();
        }));
        System.out.println("READY");
        System.out.flush();
        streams.start();
        closed.await();
    }
}
