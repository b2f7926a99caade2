// A broker metrics reporter for pykaf's KIP-714 tests: it makes Kafka offer
// GetTelemetrySubscriptions and PushTelemetry (a broker advertises them only
// with a client telemetry exporter configured) and writes every push it
// accepts to a file in the directory named by the broker property
// pykaf.telemetry.dir: <n>-<client instance id>-<terminating>.bin holding the
// (decompressed) OTLP MetricsData bytes.
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetryContext;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;

public class PushedMetricsRecorder implements MetricsReporter, ClientTelemetryExporterProvider {
    private Path dir;
    private final AtomicInteger count = new AtomicInteger();

    @Override
    public void configure(Map<String, ?> configs) {
        dir = Paths.get(String.valueOf(configs.get("pykaf.telemetry.dir")));
    }

    @Override
    public void init(List<KafkaMetric> metrics) {}

    @Override
    public void metricChange(KafkaMetric metric) {}

    @Override
    public void metricRemoval(KafkaMetric metric) {}

    @Override
    public void close() {}

    @Override
    public ClientTelemetryExporter clientTelemetryExporter() {
        return this::record;
    }

    private void record(ClientTelemetryContext context, ClientTelemetryPayload payload) {
        ByteBuffer data = payload.data().duplicate();
        byte[] bytes = new byte[data.remaining()];
        data.get(bytes);
        String name = count.incrementAndGet() + "-" + payload.clientInstanceId() + "-"
            + payload.isTerminating() + ".bin";
        try {
            Path tmp = dir.resolve(name + ".tmp");
            Files.write(tmp, bytes);
            Files.move(tmp, dir.resolve(name));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
