import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.LongSerializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.test.TestRecord;

/**
 * Reference side of the differential conformance harness.
 *
 * <p>Reads one JSON request per line on stdin:
 * {"id": n, "family": "...", "params": {...}, "caching": bool,
 *  "inputs": [{"topic": "input", "key": str|null, "value": int|null, "ts": int}, ...]}
 * and writes one JSON response per line on stdout (in completion order, match by id):
 * {"id": n, "outputs": {"topic": [[key, value, ts], ...]}, "error": null|str}.
 *
 * <p>A fresh topology and TopologyTestDriver is built per request. Requests are processed by a
 * small pool of worker threads (HARNESS_THREADS, default 2), each with its own state directory.
 * A request {"id": n, "command": "ping"} is answered with {"id": n, "pong": true}.
 */
public final class Harness {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static PrintStream protocolOut;
    private static Path stateRoot;
    private static final AtomicInteger WORKER_IDS = new AtomicInteger();
    private static final ThreadLocal<Path> WORKER_DIR =
            ThreadLocal.withInitial(() -> stateRoot.resolve("w" + WORKER_IDS.incrementAndGet()));

    private Harness() {}

    public static void main(String[] args) throws Exception {
        // Keep stdout for the protocol only: anything else printing to System.out goes to stderr.
        protocolOut = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        // Load every harness class now: a later recompile (another session) swaps the class folder.
        for (Class<?> nested : Families.class.getDeclaredClasses()) {
            Class.forName(nested.getName());
        }
        stateRoot = createStateRoot();
        int threads = Integer.parseInt(System.getenv().getOrDefault("HARNESS_THREADS", "2"));
        ExecutorService pool = Executors.newFixedThreadPool(Math.max(1, threads), r -> {
            Thread t = new Thread(r, "harness-worker");
            t.setDaemon(true);
            return t;
        });
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isBlank()) {
                    continue;
                }
                final String request = line;
                pool.submit(() -> respond(request));
            }
        } finally {
            pool.shutdown();
            pool.awaitTermination(60, TimeUnit.SECONDS);
            deleteTree(stateRoot);
        }
    }

    /**
     * TopologyTestDriver commits (RocksDB flush + fsync'ed checkpoint files) after every input
     * record: on a real disk that costs ~10 ms per record, on tmpfs almost nothing. So the state
     * goes to HARNESS_STATE_DIR, else /dev/shm when writable, else the temp folder.
     */
    private static Path createStateRoot() throws IOException {
        String configured = System.getenv("HARNESS_STATE_DIR");
        if (configured != null && !configured.isBlank()) {
            Path dir = Path.of(configured);
            Files.createDirectories(dir);
            return Files.createTempDirectory(dir, "conformance-harness-");
        }
        Path shm = Path.of("/dev/shm");
        if (Files.isDirectory(shm) && Files.isWritable(shm)) {
            try {
                return Files.createTempDirectory(shm, "conformance-harness-");
            } catch (IOException ignored) {
                // fall back to the temp folder
            }
        }
        return Files.createTempDirectory("conformance-harness-");
    }

    private static void respond(String line) {
        ObjectNode response = JSON.createObjectNode();
        try {
            JsonNode request = JSON.readTree(line);
            response.set("id", request.get("id"));
            if (request.has("command")) {
                response.put("pong", true);
            } else {
                response.setAll(run(request));
            }
        } catch (Throwable e) {
            response.putNull("outputs");
            response.put("error", describe(e));
        }
        String text;
        try {
            text = JSON.writeValueAsString(response);
        } catch (IOException e) {
            text = "{\"id\":null,\"outputs\":null,\"error\":\"cannot serialise response\"}";
        }
        synchronized (protocolOut) {
            protocolOut.println(text);
            protocolOut.flush();
        }
    }

    static String describe(Throwable e) {
        StringBuilder sb = new StringBuilder();
        Throwable t = e;
        int depth = 0;
        while (t != null && depth < 6) {
            if (depth > 0) {
                sb.append(" <- caused by: ");
            }
            sb.append(t.getClass().getName()).append(": ").append(t.getMessage());
            t = t.getCause();
            depth++;
        }
        if (System.getenv("HARNESS_TRACEBACKS") != null) {
            StringWriter sw = new StringWriter();
            e.printStackTrace(new PrintWriter(sw));
            sb.append("\n").append(sw);
        }
        return sb.toString();
    }

    /** JSON for the "json" defaults: what the engine's orjson serde writes and reads (numbers
     * without a fraction read back as Long). */
    public static final class JsonSerde implements org.apache.kafka.common.serialization.Serde<Object> {
        private static final ObjectMapper MAPPER = new ObjectMapper()
                .enable(com.fasterxml.jackson.databind.DeserializationFeature.USE_LONG_FOR_INTS);

        @Override
        public org.apache.kafka.common.serialization.Serializer<Object> serializer() {
            return (topic, data) -> {
                if (data == null) {
                    return null;
                }
                try {
                    return MAPPER.writeValueAsBytes(data);
                } catch (IOException e) {
                    throw new org.apache.kafka.common.errors.SerializationException(e);
                }
            };
        }

        @Override
        public Deserializer<Object> deserializer() {
            return (topic, bytes) -> {
                if (bytes == null) {
                    return null;
                }
                try {
                    return MAPPER.readValue(bytes, Object.class);
                } catch (IOException e) {
                    throw new org.apache.kafka.common.errors.SerializationException(e);
                }
            };
        }
    }

    private static ObjectNode run(JsonNode request) throws IOException {
        String family = request.get("family").asText();
        JsonNode params = request.has("params") ? request.get("params") : JSON.createObjectNode();
        boolean caching = request.has("caching") && request.get("caching").asBoolean();
        boolean optimize = request.has("optimize") && request.get("optimize").asBoolean();
        String defaults = request.has("defaults") ? request.get("defaults").asText() : "string-long";

        Properties props = new Properties();
        props.put(StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG,
                optimize ? StreamsConfig.OPTIMIZE : StreamsConfig.NO_OPTIMIZATION);
        Families.Built built = Families.build(family, params, props);
        Topology topology = built.topology;

        Path stateDir = WORKER_DIR.get();
        Files.createDirectories(stateDir);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "conformance");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "dummy:1234");
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, caching ? 10485760L : 0L);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG,
                defaults.equals("json") ? JsonSerde.class : Serdes.String().getClass());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, switch (defaults) {
            case "string-long" -> Serdes.Long().getClass();
            case "string-string" -> Serdes.String().getClass();
            case "json" -> JsonSerde.class;
            default -> throw new IllegalArgumentException("unknown defaults " + defaults);
        });

        // Like the Python side: an exception while piping stops the trace, the outputs written so
        // far are still read and returned beside the error.
        ObjectNode outputs = JSON.createObjectNode();
        String error = null;
        TopologyTestDriver driver = new TopologyTestDriver(topology, props, Instant.ofEpochMilli(0));
        try {
            Map<String, TestInputTopic<String, Long>> inputs = new LinkedHashMap<>();
            for (JsonNode rec : request.get("inputs")) {
                String topic = rec.get("topic").asText();
                TestInputTopic<String, Long> in = inputs.computeIfAbsent(topic,
                        t -> driver.createInputTopic(t, new StringSerializer(), new LongSerializer()));
                JsonNode k = rec.get("key");
                JsonNode v = rec.get("value");
                String key = k == null || k.isNull() ? null : k.asText();
                Long value = v == null || v.isNull() ? null : v.asLong();
                in.pipeInput(key, value, rec.get("ts").asLong());
            }
        } catch (RuntimeException e) {
            error = describe(e);
        }
        ObjectNode raw = JSON.createObjectNode();
        try {
            // every topic written (outputs, repartitions, changelogs), byte for byte; a topic
            // can be read once, so the outputs are decoded from the same records
            Map<String, List<TestRecord<byte[], byte[]>>> written = new java.util.TreeMap<>();
            for (String topic : driver.producedTopicNames()) {
                written.put(topic, driver.createOutputTopic(
                        topic, new ByteArrayDeserializer(), new ByteArrayDeserializer()).readRecordsToList());
            }
            for (Map.Entry<String, List<TestRecord<byte[], byte[]>>> topic : written.entrySet()) {
                raw.set(topic.getKey(), rawRows(topic.getValue()));
            }
            for (Map.Entry<String, String> out : built.outputs.entrySet()) {
                outputs.set(out.getKey(), decodeTopic(
                        out.getKey(), written.getOrDefault(out.getKey(), List.of()), out.getValue()));
            }
        } catch (RuntimeException e) {
            error = error == null ? describe(e) : error;
        }
        try {
            driver.close();
        } catch (RuntimeException e) {
            error = error == null ? describe(e) : error;
        }
        ObjectNode result = JSON.createObjectNode();
        result.set("outputs", outputs);
        result.set("raw", raw);
        if (error == null) {
            result.putNull("error");
        } else {
            result.put("error", error);
        }
        return result;
    }

    /** [keyHex, valueHex, timestamp, [[headerKey, headerValueHex], ...]] per record. */
    private static ArrayNode rawRows(List<TestRecord<byte[], byte[]>> records) {
        HexFormat hex = HexFormat.of();
        ArrayNode rows = JSON.createArrayNode();
        for (TestRecord<byte[], byte[]> r : records) {
            ArrayNode row = JSON.createArrayNode();
            if (r.key() == null) {
                row.addNull();
            } else {
                row.add(hex.formatHex(r.key()));
            }
            if (r.value() == null) {
                row.addNull();
            } else {
                row.add(hex.formatHex(r.value()));
            }
            row.add(r.timestamp() == null ? 0L : r.timestamp());
            ArrayNode headers = JSON.createArrayNode();
            for (Header h : r.headers()) {
                ArrayNode header = JSON.createArrayNode();
                header.add(h.key());
                if (h.value() == null) {
                    header.addNull();
                } else {
                    header.add(hex.formatHex(h.value()));
                }
                headers.add(header);
            }
            row.add(headers);
            rows.add(row);
        }
        return rows;
    }

    /** keyKind: "string", "time:<windowSizeMs>" or "session". */
    private static ArrayNode decodeTopic(
            String topic, List<TestRecord<byte[], byte[]>> records, String keyKind) {
        Deserializer<?> keyDeserializer;
        if (keyKind.equals("string")) {
            keyDeserializer = new StringDeserializer();
        } else if (keyKind.equals("session")) {
            keyDeserializer = WindowedSerdes.sessionWindowedSerdeFrom(String.class).deserializer();
        } else if (keyKind.startsWith("time:")) {
            long size = Long.parseLong(keyKind.substring("time:".length()));
            keyDeserializer = WindowedSerdes.timeWindowedSerdeFrom(String.class, size).deserializer();
        } else {
            throw new IllegalArgumentException("unknown key kind " + keyKind);
        }
        LongDeserializer valueDeserializer = new LongDeserializer();
        ArrayNode rows = JSON.createArrayNode();
        for (TestRecord<byte[], byte[]> r : records) {
            Object key = keyDeserializer.deserialize(topic, r.key());
            rows.add(row(key == null ? null : key.toString(),
                    valueDeserializer.deserialize(topic, r.value()), r.timestamp()));
        }
        return rows;
    }

    private static ArrayNode row(String key, Long value, Long ts) {
        ArrayNode row = JSON.createArrayNode();
        if (key == null) {
            row.addNull();
        } else {
            row.add(key);
        }
        if (value == null) {
            row.addNull();
        } else {
            row.add(value.longValue());
        }
        row.add(ts == null ? 0L : ts);
        return row;
    }

    private static void deleteTree(Path root) {
        try (Stream<Path> paths = Files.walk(root)) {
            List<Path> all = paths.sorted(Comparator.reverseOrder()).toList();
            for (Path p : all) {
                Files.deleteIfExists(p);
            }
        } catch (IOException ignored) {
            // best effort
        }
    }
}
