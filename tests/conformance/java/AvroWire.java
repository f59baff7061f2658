import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.Properties;

import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;

/**
 * The reference of the Python Avro serdes' bytes: Kafka Streams' TopologyTestDriver runs a
 * topology over Avro values in Confluent's wire format (the magic byte 0, the 4-byte schema
 * id, then Avro's binary encoding), written and read by Apache Avro's Java implementation.
 *
 * <p>{@code java AvroWire <schema.avsc> <schema id>}; standard input: one record a line,
 * {@code key TAB hex(value bytes)} on topic "orders"; standard output: the records of topic
 * "big-orders" in the same form. The topology keeps orders whose amount is over 10 and doubles
 * the amount.
 */
public final class AvroWire {

    /** Generic records framed as Confluent's serializers frame them, with one schema. */
    static final class ConfluentAvroSerde implements Serde<GenericRecord> {
        private final Schema schema;
        private final int schemaId;

        ConfluentAvroSerde(Schema schema, int schemaId) {
            this.schema = schema;
            this.schemaId = schemaId;
        }

        @Override
        public Serializer<GenericRecord> serializer() {
            return (topic, record) -> {
                if (record == null) {
                    return null;
                }
                try {
                    ByteArrayOutputStream out = new ByteArrayOutputStream();
                    out.write(0);
                    out.write(ByteBuffer.allocate(4).putInt(schemaId).array());
                    BinaryEncoder encoder = EncoderFactory.get().binaryEncoder(out, null);
                    new GenericDatumWriter<GenericRecord>(schema).write(record, encoder);
                    encoder.flush();
                    return out.toByteArray();
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            };
        }

        @Override
        public Deserializer<GenericRecord> deserializer() {
            return (topic, data) -> {
                if (data == null) {
                    return null;
                }
                ByteBuffer buffer = ByteBuffer.wrap(data);
                if (buffer.get() != 0 || buffer.getInt() != schemaId) {
                    throw new IllegalArgumentException("not framed with schema id " + schemaId);
                }
                try {
                    return new GenericDatumReader<GenericRecord>(schema)
                            .read(null, DecoderFactory.get().binaryDecoder(data, 5, data.length - 5, null));
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            };
        }
    }

    public static void main(String[] args) throws IOException {
        Schema schema = new Schema.Parser().parse(Files.readString(Path.of(args[0])));
        Serde<GenericRecord> avro = new ConfluentAvroSerde(schema, Integer.parseInt(args[1]));
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream("orders", Consumed.with(Serdes.String(), avro))
                .filter((key, order) -> (Long) order.get("amount") > 10)
                .mapValues(order -> {
                    GenericData.Record doubled = new GenericData.Record(schema);
                    for (Schema.Field field : schema.getFields()) {
                        doubled.put(field.name(), order.get(field.name()));
                    }
                    doubled.put("amount", (Long) order.get("amount") * 2);
                    return (GenericRecord) doubled;
                })
                .to("big-orders", Produced.with(Serdes.String(), avro));
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "avro-wire");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
        HexFormat hex = HexFormat.of();
        try (TopologyTestDriver driver = new TopologyTestDriver(builder.build(), props)) {
            TestInputTopic<String, byte[]> in = driver.createInputTopic(
                    "orders", Serdes.String().serializer(), Serdes.ByteArray().serializer());
            BufferedReader lines = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line = lines.readLine(); line != null; line = lines.readLine()) {
                String[] parts = line.split("\t", 2);
                in.pipeInput(parts[0], hex.parseHex(parts[1]));
            }
            TestOutputTopic<String, byte[]> out = driver.createOutputTopic(
                    "big-orders", Serdes.String().deserializer(), Serdes.ByteArray().deserializer());
            for (KeyValue<String, byte[]> record : out.readKeyValuesToList()) {
                System.out.println(record.key + "\t" + hex.formatHex(record.value));
            }
        }
    }
}
