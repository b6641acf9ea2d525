package org.batchacker.storm;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.storm.Config;
import org.apache.storm.LocalCluster;
import org.apache.storm.spout.SpoutOutputCollector;
import org.apache.storm.task.OutputCollector;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.BoltDeclarer;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.TopologyBuilder;
import org.apache.storm.topology.base.BaseRichBolt;
import org.apache.storm.topology.base.BaseRichSpout;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Tuple;
import org.apache.storm.tuple.Values;
import org.apache.storm.utils.TupleUtils;

/**
 * A seeded topology run in Storm's LocalCluster with {@link AckEventHook} attached, for the
 * conformance tests: its spout writes Storm's verdict on each of its messages (the spout's
 * {@code ack} and {@code fail} callbacks) beside the hook's files.
 *
 * <p>{@code source} emits ({@code msg_id}, {@code n}); {@code split} emits one to three children
 * anchored to each input; {@code join} emits one tuple anchored to two inputs (multi-anchoring)
 * and acks both; {@code sink} acks. Each message's fate is drawn from the seed and its id:
 * in {@code split} it may be failed ({@code collector.fail}), never acked, or held with
 * {@code resetTimeout} once a second for 2.5 message timeouts and then acked, or acked without a
 * reset 0.5 to 3.5 timeouts later; in {@code sink} a child may be failed. The scenario sets the
 * odds, and {@code parallel} also runs two ackers, two spout tasks and two tasks of each bolt
 * (fields grouping on the message id into {@code split}, shuffle after it).
 *
 * <p>Usage: {@code ConformanceTopology SCENARIO FOLDER MESSAGES EMIT_SECONDS TIMEOUT_SECONDS SEED}.
 */
public final class ConformanceTopology {
    enum Scenario {
        CHAIN(0, 0, 0, 0, 0),
        FAIL(0.12, 0, 0, 0, 0.06),
        TIMEOUT(0, 0.15, 0, 0, 0),
        RESET(0, 0, 0.15, 0, 0),
        SLOW(0, 0, 0, 0.3, 0),
        PARALLEL(0.06, 0.06, 0.06, 0, 0.03);

        final double failInSplit;
        final double neverAcked;
        final double held;
        final double slow;
        final double failInSink;

        Scenario(double failInSplit, double neverAcked, double held, double slow, double failInSink) {
            this.failInSplit = failInSplit;
            this.neverAcked = neverAcked;
            this.held = held;
            this.slow = slow;
            this.failInSink = failInSink;
        }
    }

    private ConformanceTopology() {}

    public static void main(String[] args) throws Exception {
        Scenario scenario = Scenario.valueOf(args[0].toUpperCase());
        Path folder = Paths.get(args[1]).toAbsolutePath();
        int messages = Integer.parseInt(args[2]);
        int emitSeconds = Integer.parseInt(args[3]);
        int timeoutSeconds = Integer.parseInt(args[4]);
        long seed = Long.parseLong(args[5]);
        int width = scenario == Scenario.PARALLEL ? 2 : 1;

        TopologyBuilder builder = new TopologyBuilder();
        builder.setSpout("source", new Source(folder.toString(), messages / width, emitSeconds), width);
        BoltDeclarer split = builder.setBolt("split", new Split(scenario, seed, timeoutSeconds), width)
            .addConfiguration(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 1);
        if (width > 1) {
            split.fieldsGrouping("source", new Fields("msg_id"));
        } else {
            split.shuffleGrouping("source");
        }
        builder.setBolt("join", new Join(), width).shuffleGrouping("split")
            .addConfiguration(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 1);
        builder.setBolt("sink", new Sink(scenario, seed), width).shuffleGrouping("join");

        Config conf = new Config();
        conf.setMessageTimeoutSecs(timeoutSeconds);
        conf.setNumAckers(width);
        conf.put(Config.TOPOLOGY_AUTO_TASK_HOOKS, List.of(AckEventHook.class.getName()));
        conf.put(AckEventHook.DIR, folder.toString());
        conf.put(AckEventHook.MESSAGE_FIELD, "msg_id");
        conf.put(AckEventHook.ACKER_LOG, "true");

        // After the last emit: a held message is acked 2.5 timeouts later, and the spout times a
        // message out at its second tick after the emit (up to three timeouts later).
        long runMillis = (emitSeconds + 4L * timeoutSeconds + 2) * 1000;
        try (LocalCluster cluster = new LocalCluster()) {
            cluster.submitTopology("conformance-" + scenario.name().toLowerCase(), conf, builder.createTopology());
            Thread.sleep(runMillis);
        }
        // LocalCluster leaves threads behind that would keep the JVM alive.
        System.exit(0);
    }

    /** A message's fate, the same in every task for one seed and message id. */
    static double draw(long seed, String msgId, int salt) {
        long h = seed * 0x9E3779B97F4A7C15L + msgId.hashCode() * 31L + salt;
        h ^= h >>> 33;
        h *= 0xff51afd7ed558ccdL;
        h ^= h >>> 33;
        return (h >>> 11) * 0x1.0p-53;
    }

    static final class Source extends BaseRichSpout {
        private final String folder;
        private final int messages;
        private final int emitSeconds;
        private SpoutOutputCollector collector;
        private BufferedWriter verdicts;
        private int taskId;
        private int emitted;
        private long startedAt;

        Source(String folder, int messages, int emitSeconds) {
            this.folder = folder;
            this.messages = messages;
            this.emitSeconds = emitSeconds;
        }

        @Override
        public void open(Map<String, Object> conf, TopologyContext context, SpoutOutputCollector collector) {
            this.collector = collector;
            this.taskId = context.getThisTaskId();
            try {
                verdicts = Files.newBufferedWriter(
                    Paths.get(folder, "_spout-verdicts-task" + taskId + ".jsonl"), StandardCharsets.UTF_8);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public void nextTuple() {
            long now = System.currentTimeMillis();
            if (startedAt == 0) {
                startedAt = now;
            }
            if (emitted < messages && now - startedAt >= (long) emitted * emitSeconds * 1000 / messages) {
                String msgId = "m" + taskId + "-" + emitted;
                collector.emit(new Values(msgId, emitted), msgId);
                emitted++;
            }
        }

        @Override
        public void ack(Object msgId) {
            record(msgId, "acked");
        }

        @Override
        public void fail(Object msgId) {
            record(msgId, "failed");
        }

        private void record(Object msgId, String verdict) {
            try {
                verdicts.write("{\"msg_id\": \"" + msgId + "\", \"verdict\": \"" + verdict + "\", \"at_ms\": "
                    + System.currentTimeMillis() + "}\n");
                verdicts.flush();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public void close() {
            try {
                verdicts.close();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer declarer) {
            declarer.declare(new Fields("msg_id", "n"));
        }
    }

    static final class Split extends BaseRichBolt {
        private final Scenario scenario;
        private final long seed;
        private final int timeoutSeconds;
        private OutputCollector collector;
        private final Map<Tuple, Hold> held = new HashMap<>();

        /** A tuple acked at {@code releaseAt}; until then, with {@code resets}, reset each tick. */
        private record Hold(long releaseAt, boolean resets) {}

        Split(Scenario scenario, long seed, int timeoutSeconds) {
            this.scenario = scenario;
            this.seed = seed;
            this.timeoutSeconds = timeoutSeconds;
        }

        @Override
        public void prepare(Map<String, Object> conf, TopologyContext context, OutputCollector collector) {
            this.collector = collector;
        }

        @Override
        public void execute(Tuple input) {
            long now = System.currentTimeMillis();
            if (TupleUtils.isTick(input)) {
                for (Iterator<Map.Entry<Tuple, Hold>> it = held.entrySet().iterator(); it.hasNext(); ) {
                    Map.Entry<Tuple, Hold> entry = it.next();
                    if (now >= entry.getValue().releaseAt()) {
                        collector.ack(entry.getKey());
                        it.remove();
                    } else if (entry.getValue().resets()) {
                        collector.resetTimeout(entry.getKey());
                    }
                }
                return;
            }
            String msgId = input.getStringByField("msg_id");
            int children = 1 + (int) (draw(seed, msgId, 1) * 3);
            for (int i = 0; i < children; i++) {
                collector.emit(input, new Values(msgId, i));
            }
            double fate = draw(seed, msgId, 2);
            if (fate < scenario.failInSplit) {
                collector.fail(input);
            } else if (fate < scenario.failInSplit + scenario.neverAcked) {
                return;
            } else if (fate < scenario.failInSplit + scenario.neverAcked + scenario.held) {
                held.put(input, new Hold(now + timeoutSeconds * 2500L, true));
            } else if (fate < scenario.failInSplit + scenario.neverAcked + scenario.held + scenario.slow) {
                // Acked, without a reset, half a timeout to three and a half later: around the
                // spout's timeout (its second tick) and the acker's (its third).
                long delay = (long) (timeoutSeconds * 1000L * (0.5 + 3 * draw(seed, msgId, 4)));
                held.put(input, new Hold(now + delay, false));
            } else {
                collector.ack(input);
            }
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer declarer) {
            declarer.declare(new Fields("msg_id", "child"));
        }
    }

    static final class Join extends BaseRichBolt {
        private OutputCollector collector;
        private final List<Tuple> waiting = new ArrayList<>();

        @Override
        public void prepare(Map<String, Object> conf, TopologyContext context, OutputCollector collector) {
            this.collector = collector;
        }

        @Override
        public void execute(Tuple input) {
            if (!TupleUtils.isTick(input)) {
                waiting.add(input);
                if (waiting.size() < 2) {
                    return;
                }
            }
            if (!waiting.isEmpty()) {
                collector.emit(waiting, new Values(waiting.get(0).getStringByField("msg_id")));
                waiting.forEach(collector::ack);
                waiting.clear();
            }
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer declarer) {
            declarer.declare(new Fields("msg_id"));
        }
    }

    static final class Sink extends BaseRichBolt {
        private final Scenario scenario;
        private final long seed;
        private OutputCollector collector;
        private int seen;

        Sink(Scenario scenario, long seed) {
            this.scenario = scenario;
            this.seed = seed;
        }

        @Override
        public void prepare(Map<String, Object> conf, TopologyContext context, OutputCollector collector) {
            this.collector = collector;
        }

        @Override
        public void execute(Tuple input) {
            if (draw(seed, input.getStringByField("msg_id") + "/" + seen++, 3) < scenario.failInSink) {
                collector.fail(input);
            } else {
                collector.ack(input);
            }
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer declarer) {}
    }
}
