package org.batchacker.storm;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.storm.Config;
import org.apache.storm.LocalCluster;
import org.apache.storm.generated.KillOptions;
import org.apache.storm.spout.SpoutOutputCollector;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.TopologyBuilder;
import org.apache.storm.topology.base.BaseRichSpout;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Values;

/**
 * What the hook costs a topology: the conformance chain (spout, split into one to three
 * children, join with two anchors, sink; everything acked) run as fast as its spout may emit
 * (1,000 messages pending), without and with {@link AckEventHook}, in turns, in one
 * LocalCluster. Prints the messages acked per second of each turn after a warm-up, then the
 * medians side by side, and writes them as JSON to {@code OUT}.
 *
 * <p>Usage: {@code HookOverhead SECONDS_PER_TURN TURNS OUT}.
 */
public final class HookOverhead {
    static final AtomicLong ACKED = new AtomicLong();

    private HookOverhead() {}

    public static void main(String[] args) throws Exception {
        int seconds = Integer.parseInt(args[0]);
        int turns = Integer.parseInt(args[1]);
        Path folder = Files.createTempDirectory("hook-overhead");
        List<Double> plain = new ArrayList<>();
        List<Double> hookedRates = new ArrayList<>();
        try (LocalCluster cluster = new LocalCluster()) {
            for (int turn = 0; turn < turns; turn++) {
                for (boolean hooked : new boolean[] {false, true}) {
                    String name = (hooked ? "hooked-" : "plain-") + turn;
                    cluster.submitTopology(name, conf(hooked, folder), topology());
                    Thread.sleep(5_000);
                    long before = ACKED.get();
                    Thread.sleep(seconds * 1000L);
                    double rate = (ACKED.get() - before) / (double) seconds;
                    KillOptions now = new KillOptions();
                    now.set_wait_secs(0);
                    cluster.killTopologyWithOpts(name, now);
                    (hooked ? hookedRates : plain).add(rate);
                    System.out.printf("hook-overhead turn %d, %s: %.0f messages acked/s%n",
                        turn, hooked ? "with the hook" : "without", rate);
                    Thread.sleep(5_000);
                    deleteFiles(folder);
                }
            }
        }
        Files.delete(folder);
        double without = median(plain);
        double with = median(hookedRates);
        String summary = String.format(
            "hook-overhead median of %d turns: %.0f acked/s without, %.0f with the hook, ratio %.3f",
            turns, without, with, with / without);
        System.out.println(summary);
        Files.writeString(Paths.get(args[2]), String.format(
            "{\"turns\": %d, \"seconds_per_turn\": %d, \"acked_per_s_without\": %.0f,"
                + " \"acked_per_s_with_hook\": %.0f, \"with_over_without\": %.3f}%n",
            turns, seconds, without, with, with / without));
        System.exit(0);
    }

    /** The hook writes over 100 MB/s here: keep only one turn's files on disk. */
    private static void deleteFiles(Path folder) throws IOException {
        try (DirectoryStream<Path> files = Files.newDirectoryStream(folder)) {
            for (Path file : files) {
                Files.delete(file);
            }
        }
    }

    private static double median(List<Double> values) {
        List<Double> sorted = new ArrayList<>(values);
        Collections.sort(sorted);
        int middle = sorted.size() / 2;
        return sorted.size() % 2 == 1 ? sorted.get(middle) : (sorted.get(middle - 1) + sorted.get(middle)) / 2;
    }

    private static Config conf(boolean hooked, Path folder) {
        Config conf = new Config();
        conf.setMaxSpoutPending(1000);
        conf.setNumAckers(1);
        if (hooked) {
            conf.put(Config.TOPOLOGY_AUTO_TASK_HOOKS, List.of(AckEventHook.class.getName()));
            conf.put(AckEventHook.DIR, folder.toString());
        }
        return conf;
    }

    private static org.apache.storm.generated.StormTopology topology() {
        ConformanceTopology.Scenario chain = ConformanceTopology.Scenario.CHAIN;
        TopologyBuilder builder = new TopologyBuilder();
        builder.setSpout("source", new CountingSource());
        builder.setBolt("split", new ConformanceTopology.Split(chain, 1, 30)).shuffleGrouping("source");
        builder.setBolt("join", new ConformanceTopology.Join()).shuffleGrouping("split")
            .addConfiguration(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 1);
        builder.setBolt("sink", new ConformanceTopology.Sink(chain, 1)).shuffleGrouping("join");
        return builder.createTopology();
    }

    /** Emits as fast as the pending limit allows and counts the acks. */
    static final class CountingSource extends BaseRichSpout {
        private SpoutOutputCollector collector;
        private long emitted;

        @Override
        public void open(Map<String, Object> conf, TopologyContext context, SpoutOutputCollector collector) {
            this.collector = collector;
        }

        @Override
        public void nextTuple() {
            String msgId = "m" + emitted++;
            collector.emit(new Values(msgId, emitted), msgId);
        }

        @Override
        public void ack(Object msgId) {
            ACKED.incrementAndGet();
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer declarer) {
            declarer.declare(new Fields("msg_id", "n"));
        }
    }
}
