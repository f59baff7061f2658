import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KGroupedTable;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindowedKStream;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindowedKStream;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.StateStore;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The topology families of the conformance harness. Each must be kept identical to its Python
 * twin in tests/conformance/families.py (same operators, same lambdas, same names).
 */
final class Families {
    private Families() {}

    static final class Built {
        final Topology topology;
        /** output topic -> key kind ("string", "time:<size>", "session"), in a stable order. */
        final Map<String, String> outputs;

        Built(Topology topology, Map<String, String> outputs) {
            this.topology = topology;
            this.outputs = outputs;
        }
    }

    static final Serde<String> S = Serdes.String();
    static final Serde<Long> L = Serdes.Long();

    static Built build(String family, JsonNode p, java.util.Properties buildProps) {
        StreamsBuilder b = new StreamsBuilder();
        Map<String, String> outs = new LinkedHashMap<>();
        switch (family) {
            case "stateless" -> stateless(b, outs);
            case "agg" -> agg(b, p, outs);
            case "tumbling", "hopping" -> timeWindowed(b, family, p, outs);
            case "sliding" -> sliding(b, p, outs);
            case "session" -> session(b, p, outs);
            case "suppress_time_limit" -> suppressTimeLimit(b, p, outs);
            case "table_groupby" -> tableGroupBy(b, p, outs);
            case "table_ops" -> tableOps(b, p, outs);
            case "process" -> process(b, p, outs);
            default -> {
                // Families of later issues live in their own classes; each answers for its names.
                if (!StreamJoinFamilies.build(family, b, p, outs)
                        && !TableJoinFamilies.build(family, b, p, outs)
                        && !ForeignKeyFamilies.build(family, b, p, outs)
                        && !MoreFamilies.build(family, b, p, outs)
                        && !ParityFamilies.build(family, b, p, outs)) {
                    throw new IllegalArgumentException("unknown family " + family);
                }
            }
        }
        return new Built(b.build(buildProps), outs);
    }

    // ---------------------------------------------------------------- helpers

    static boolean isEven(Long v) {
        return v != null && Math.floorMod(v, 2L) == 0;
    }

    /** Null-safe sum: Kafka hands null values to some aggregators (windowed ones). */
    static Long plus(Long a, Long b) {
        if (a == null) {
            return b;
        }
        if (b == null) {
            return a;
        }
        return a + b;
    }

    /** Null-safe difference, for the table subtractors. */
    static Long minus(Long a, Long b) {
        if (a == null) {
            return b == null ? null : -b;
        }
        if (b == null) {
            return a;
        }
        return a - b;
    }

    static String mod3(Long v) {
        return v == null ? null : String.valueOf(Math.floorMod(v, 3L));
    }

    static String str(JsonNode p, String name) {
        return p.get(name).asText();
    }

    static long num(JsonNode p, String name) {
        return p.get(name).asLong();
    }

    static boolean has(JsonNode p, String name) {
        return p.has(name) && !p.get(name).isNull();
    }

    /** KV-store Materialized: params "store" ("rocksdb" default, "in_memory"). */
    static Materialized<String, Long, KeyValueStore<Bytes, byte[]>> kv(String name, JsonNode p) {
        return storeOptions(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as(name), p, 0);
    }

    /** Window/session-store Materialized: "store", and "retention_extra" (retention = min + extra). */
    static <St extends StateStore> Materialized<String, Long, St> windowed(String name, JsonNode p, long minRetention) {
        return storeOptions(Materialized.<String, Long, St>as(name), p, minRetention);
    }

    private static <St extends StateStore> Materialized<String, Long, St> storeOptions(
            Materialized<String, Long, St> m, JsonNode p, long minRetention) {
        m = m.withKeySerde(S).withValueSerde(L);
        if (p.path("store").asText("rocksdb").equals("in_memory")) {
            m = m.withStoreType(Materialized.StoreType.IN_MEMORY);
        }
        if (has(p, "retention_extra")) {
            m = m.withRetention(Duration.ofMillis(minRetention + num(p, "retention_extra")));
        }
        return m;
    }

    static long grace(JsonNode p) {
        return has(p, "grace") ? num(p, "grace") : 0L;
    }

    static KStream<String, Long> input(StreamsBuilder b, String topic) {
        return b.stream(topic, Consumed.with(S, L));
    }

    static void toOut(KStream<String, Long> s, String topic, Map<String, String> outs) {
        s.to(topic, Produced.with(S, L));
        outs.put(topic, "string");
    }

    // ---------------------------------------------------------------- 1. stateless

    static void stateless(StreamsBuilder b, Map<String, String> outs) {
        KStream<String, Long> s = input(b, "input");
        toOut(s.filter((k, v) -> isEven(v)).mapValues(v -> v * 10), "out1", outs);
        toOut(s.filterNot((k, v) -> isEven(v)).selectKey((k, v) -> k + "x"), "out2", outs);
        toOut(s.flatMapValues(v -> v == null
                ? Collections.<Long>emptyList()
                : Collections.nCopies((int) Math.floorMod(v, 3L), v)), "out3", outs);
        toOut(s.map((k, v) -> KeyValue.pair(k + ":" + v, v == null ? null : v + 1)), "out4", outs);
        Map<String, KStream<String, Long>> br = s.split(Named.as("br-"))
                .branch((k, v) -> v != null && v < 0, Branched.as("neg"))
                .branch((k, v) -> v != null && v == 0, Branched.as("zero"))
                .defaultBranch(Branched.as("rest"));
        toOut(br.get("br-neg"), "out-neg", outs);
        toOut(br.get("br-zero"), "out-zero", outs);
        toOut(br.get("br-rest"), "out-rest", outs);
        toOut(br.get("br-neg").merge(br.get("br-zero")), "out-merged", outs);
        KStream<String, Long> s2 = input(b, "input2");
        toOut(s.merge(s2).mapValues(v -> v == null ? null : v - 1), "out5", outs);
    }

    // ---------------------------------------------------------------- 2. agg

    static KTable<String, Long> aggregateGrouped(KGroupedStream<String, Long> g, String op,
                                                 Materialized<String, Long, KeyValueStore<Bytes, byte[]>> m) {
        return switch (op) {
            case "count" -> g.count(m);
            case "reduce" -> g.reduce(Families::plus, m);
            case "aggregate" -> g.aggregate(() -> 0L, (k, v, a) -> plus(a, v), m);
            default -> throw new IllegalArgumentException("op " + op);
        };
    }

    static void agg(StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        KStream<String, Long> s = input(b, "input");
        KGroupedStream<String, Long> g = p.path("rekey").asBoolean(false)
                ? s.groupBy((k, v) -> mod3(v), Grouped.with(S, L))
                : s.groupByKey(Grouped.with(S, L));
        toOut(aggregateGrouped(g, str(p, "op"), kv("agg-store", p)).toStream(), "out", outs);
    }

    // ---------------------------------------------------------------- 3./4. time windows

    static KTable<Windowed<String>, Long> windowedOp(TimeWindowedKStream<String, Long> w, String op, String emit,
                                                     Materialized<String, Long, WindowStore<Bytes, byte[]>> m) {
        if (emit.equals("on_window_close")) {
            w = w.emitStrategy(EmitStrategy.onWindowClose());
        }
        KTable<Windowed<String>, Long> t = switch (op) {
            case "count" -> w.count(m);
            case "reduce" -> w.reduce(Families::plus, m);
            case "aggregate" -> w.aggregate(() -> 0L, (k, v, a) -> plus(a, v), m);
            default -> throw new IllegalArgumentException("op " + op);
        };
        if (emit.equals("suppress")) {
            t = t.suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()));
        }
        return t;
    }

    static void timeWindowed(StreamsBuilder b, String family, JsonNode p, Map<String, String> outs) {
        long size = num(p, "size");
        TimeWindows windows = has(p, "grace")
                ? TimeWindows.ofSizeAndGrace(Duration.ofMillis(size), Duration.ofMillis(num(p, "grace")))
                : TimeWindows.ofSizeWithNoGrace(Duration.ofMillis(size));
        if (family.equals("hopping")) {
            windows = windows.advanceBy(Duration.ofMillis(num(p, "advance")));
        }
        KTable<Windowed<String>, Long> t = windowedOp(
                input(b, "input").groupByKey().windowedBy(windows), str(p, "op"), str(p, "emit"),
                windowed("win-store", p, size + grace(p)));
        t.toStream().to("out", Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, size), L));
        outs.put("out", "time:" + size);
    }

    static void sliding(StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        long diff = num(p, "diff");
        SlidingWindows windows = has(p, "grace")
                ? SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(diff), Duration.ofMillis(num(p, "grace")))
                : SlidingWindows.ofTimeDifferenceWithNoGrace(Duration.ofMillis(diff));
        KTable<Windowed<String>, Long> t = windowedOp(
                input(b, "input").groupByKey().windowedBy(windows), str(p, "op"), str(p, "emit"),
                windowed("win-store", p, 2 * diff + grace(p)));
        t.toStream().to("out", Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, diff), L));
        outs.put("out", "time:" + diff);
    }

    // ---------------------------------------------------------------- 5. session

    static void session(StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        long gap = num(p, "gap");
        SessionWindows windows = has(p, "grace")
                ? SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(gap), Duration.ofMillis(num(p, "grace")))
                : SessionWindows.ofInactivityGapWithNoGrace(Duration.ofMillis(gap));
        String emit = str(p, "emit");
        SessionWindowedKStream<String, Long> w = input(b, "input").groupByKey().windowedBy(windows);
        if (emit.equals("on_window_close")) {
            w = w.emitStrategy(EmitStrategy.onWindowClose());
        }
        Materialized<String, Long, SessionStore<Bytes, byte[]>> m = windowed("sess-store", p, gap + grace(p));
        KTable<Windowed<String>, Long> t = switch (str(p, "op")) {
            case "count" -> w.count(m);
            case "reduce" -> w.reduce(Families::plus, m);
            case "aggregate" -> w.aggregate(() -> 0L, (k, v, a) -> plus(a, v), (k, a1, a2) -> plus(a1, a2), m);
            default -> throw new IllegalArgumentException("op " + str(p, "op"));
        };
        if (emit.equals("suppress")) {
            t = t.suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()));
        }
        t.toStream().to("out", Produced.with(WindowedSerdes.sessionWindowedSerdeFrom(String.class), L));
        outs.put("out", "session");
    }

    // ---------------------------------------------------------------- 6. suppress untilTimeLimit

    static void suppressTimeLimit(StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        Suppressed.BufferConfig<?> buffer = switch (str(p, "buffer")) {
            case "unbounded" -> Suppressed.BufferConfig.unbounded();
            case "max_records" -> Suppressed.BufferConfig.maxRecords(num(p, "n"));
            case "max_records_eager" -> Suppressed.BufferConfig.maxRecords(num(p, "n")).emitEarlyWhenFull();
            case "strict_max_records" -> Suppressed.BufferConfig.unbounded().withMaxRecords(num(p, "n"));
            default -> throw new IllegalArgumentException("buffer " + str(p, "buffer"));
        };
        KTable<String, Long> counts = input(b, "input").groupByKey().count(kv("cnt-store", p));
        toOut(counts.suppress(Suppressed.untilTimeLimit(Duration.ofMillis(num(p, "limit")), buffer)).toStream(),
                "out", outs);
    }

    // ---------------------------------------------------------------- 7. table groupBy

    static void tableGroupBy(StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        String variant = str(p, "variant");
        KTable<String, Long> t = variant.equals("unmaterialized")
                ? b.table("input", Consumed.with(S, L))
                : b.table("input", Consumed.with(S, L), kv("src-table", p));
        if (variant.equals("filtered")) {
            t = t.filter((k, v) -> v != null && v >= 0);
        }
        KGroupedTable<String, Long> g = t.groupBy((k, v) -> KeyValue.pair(mod3(v), v), Grouped.with(S, L));
        Materialized<String, Long, KeyValueStore<Bytes, byte[]>> m = kv("gb-store", p);
        KTable<String, Long> r = switch (str(p, "op")) {
            case "count" -> g.count(m);
            case "reduce" -> g.reduce(Families::plus, Families::minus, m);
            case "aggregate" -> g.aggregate(() -> 0L, (k, v, a) -> plus(a, v), (k, v, a) -> minus(a, v), m);
            default -> throw new IllegalArgumentException("op " + str(p, "op"));
        };
        toOut(r.toStream(), "out", outs);
    }

    // ---------------------------------------------------------------- 8. table ops

    static void tableOps(StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        String variant = str(p, "variant");
        boolean srcMat = p.path("source_materialized").asBoolean(false);
        KTable<String, Long> t;
        if (variant.startsWith("to_table")) {
            KStream<String, Long> s = input(b, "input");
            t = variant.equals("to_table_materialized")
                    ? s.toTable(kv("tt-store", p))
                    : s.toTable();
        } else {
            KTable<String, Long> src = srcMat
                    ? b.table("input", Consumed.with(S, L), kv("src-table", p))
                    : b.table("input", Consumed.with(S, L));
            Materialized<String, Long, KeyValueStore<Bytes, byte[]>> m = kv("op-store", p);
            t = switch (variant) {
                case "filter" -> src.filter((k, v) -> isEven(v));
                case "filter_materialized" -> src.filter((k, v) -> isEven(v), m);
                case "filter_not" -> src.filterNot((k, v) -> isEven(v));
                case "map_values" -> src.mapValues(v -> v == null ? null : v + 1);
                case "map_values_materialized" -> src.mapValues(v -> v == null ? null : v + 1, m);
                default -> throw new IllegalArgumentException("variant " + variant);
            };
        }
        toOut(t.toStream(), "out", outs);
    }

    // ---------------------------------------------------------------- 9. Processor API

    static final class SumProcessor implements Processor<String, Long, String, Long> {
        private final long interval;
        private ProcessorContext<String, Long> context;
        private KeyValueStore<String, Long> store;

        SumProcessor(long interval) {
            this.interval = interval;
        }

        @Override
        public void init(ProcessorContext<String, Long> context) {
            this.context = context;
            this.store = context.getStateStore("sum-store");
            context.schedule(Duration.ofMillis(interval), PunctuationType.STREAM_TIME, ts -> {
                long n = 0;
                try (KeyValueIterator<String, Long> it = store.all()) {
                    while (it.hasNext()) {
                        it.next();
                        n++;
                    }
                }
                this.context.forward(new Record<>("count", n, ts));
            });
        }

        @Override
        public void process(Record<String, Long> record) {
            if (record.key() == null || record.value() == null) {
                return;
            }
            Long old = store.get(record.key());
            long sum = (old == null ? 0L : old) + record.value();
            store.put(record.key(), sum);
            context.forward(record.withValue(sum));
        }
    }

    static final class SumValuesProcessor implements FixedKeyProcessor<String, Long, Long> {
        private final long interval;
        private FixedKeyProcessorContext<String, Long> context;
        private KeyValueStore<String, Long> store;

        SumValuesProcessor(long interval) {
            this.interval = interval;
        }

        @Override
        public void init(FixedKeyProcessorContext<String, Long> context) {
            this.context = context;
            this.store = context.getStateStore("sum-store");
            // A FixedKeyProcessor cannot forward new records from a punctuator: reset the sums.
            context.schedule(Duration.ofMillis(interval), PunctuationType.STREAM_TIME, ts -> {
                List<String> keys = new ArrayList<>();
                try (KeyValueIterator<String, Long> it = store.all()) {
                    while (it.hasNext()) {
                        keys.add(it.next().key);
                    }
                }
                for (String k : keys) {
                    store.put(k, 0L);
                }
            });
        }

        @Override
        public void process(FixedKeyRecord<String, Long> record) {
            if (record.key() == null || record.value() == null) {
                return;
            }
            Long old = store.get(record.key());
            long sum = (old == null ? 0L : old) + record.value();
            store.put(record.key(), sum);
            context.forward(record.withValue(sum));
        }
    }

    static void process(StreamsBuilder b, JsonNode p, Map<String, String> outs) {
        long interval = num(p, "interval");
        b.addStateStore(Stores.keyValueStoreBuilder(
                p.path("store").asText("rocksdb").equals("in_memory")
                        ? Stores.inMemoryKeyValueStore("sum-store")
                        : Stores.persistentKeyValueStore("sum-store"),
                S, L));
        KStream<String, Long> s = input(b, "input");
        KStream<String, Long> r = str(p, "api").equals("process_values")
                ? s.processValues(() -> new SumValuesProcessor(interval), "sum-store")
                : s.process(() -> new SumProcessor(interval), "sum-store");
        toOut(r, "out", outs);
    }
}
