package org.batchacker.storm;

import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.storm.Constants;
import org.apache.storm.daemon.Acker;
import org.apache.storm.hooks.BaseTaskHook;
import org.apache.storm.hooks.info.BoltExecuteInfo;
import org.apache.storm.hooks.info.EmitInfo;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Tuple;

/**
 * Writes every message Storm's acker executes as an {@code ack_events} row, in the order the
 * acker executed it, to rolling JSON Lines files that {@code acker ingest} reads.
 *
 * <p>Add it to a topology with {@code topology.auto.task.hooks: ["org.batchacker.storm.AckEventHook"]}
 * and name the folder with {@code batchacker.hook.dir}. Storm installs the hook in every task:
 * in the {@code __acker} tasks it writes the rows (Storm calls {@code boltExecute} on the
 * acker's thread right after {@code Acker.execute} ran the tuple); in spout tasks, when
 * {@code batchacker.hook.message.field} names one of the spout's output fields, it leaves that
 * field's value for the acker as the tree's {@code source_msg_id} (see {@link MessageKeys});
 * in other tasks it does nothing.
 *
 * <p>Settings (topology configuration): {@code batchacker.hook.dir} (required),
 * {@code batchacker.hook.roll.bytes} (default 64 MiB), {@code batchacker.hook.roll.seconds}
 * (default 60), {@code batchacker.hook.message.field}, and {@code batchacker.hook.acker.log}
 * (default false: also write each acker tick, with how many rows the task had written before
 * it, and each verdict the acker sends a spout to {@code _acker-log-*.jsonl} files, which
 * {@code acker ingest} skips; the conformance tests read them).
 */
public class AckEventHook extends BaseTaskHook {
    public static final String DIR = "batchacker.hook.dir";
    public static final String ROLL_BYTES = "batchacker.hook.roll.bytes";
    public static final String ROLL_SECONDS = "batchacker.hook.roll.seconds";
    public static final String MESSAGE_FIELD = "batchacker.hook.message.field";
    public static final String ACKER_LOG = "batchacker.hook.acker.log";

    private static final long DEFAULT_ROLL_BYTES = 64L << 20;
    private static final long DEFAULT_ROLL_SECONDS = 60;
    private static final DateTimeFormatter EVENT_TIME =
        DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSS").withZone(ZoneOffset.UTC);

    private int taskId;
    private RollingJsonLines events;
    private RollingJsonLines ackerLog;
    private long sequence;
    private final Utf8Line line = new Utf8Line();
    private long formattedMillis = Long.MIN_VALUE;
    private String formattedTime;
    private TopologyContext context;
    private String messageField;
    private final Map<String, Integer> messageFieldIndex = new HashMap<>();
    private String pendingMessageKey;

    @Override
    public void prepare(Map<String, Object> conf, TopologyContext context) {
        this.context = context;
        this.taskId = context.getThisTaskId();
        String component = context.getThisComponentId();
        if (Acker.ACKER_COMPONENT_ID.equals(component)) {
            Object dir = conf.get(DIR);
            if (dir == null) {
                throw new IllegalArgumentException(DIR + " is not set: name the folder the acker's events go to");
            }
            Path folder = Paths.get(dir.toString());
            long rollBytes = number(conf, ROLL_BYTES, DEFAULT_ROLL_BYTES);
            long rollMillis = number(conf, ROLL_SECONDS, DEFAULT_ROLL_SECONDS) * 1000;
            String files = safe(context.getStormId()) + "-task" + taskId;
            events = new RollingJsonLines(folder, "ack-events-" + files, rollBytes, rollMillis);
            if (Boolean.parseBoolean(String.valueOf(conf.getOrDefault(ACKER_LOG, "false")))) {
                ackerLog = new RollingJsonLines(folder, "_acker-log-" + files, rollBytes, rollMillis);
            }
        } else if (context.getRawTopology().get_spouts().containsKey(component) && conf.get(MESSAGE_FIELD) != null) {
            messageField = conf.get(MESSAGE_FIELD).toString();
        }
    }

    @Override
    public void boltExecute(BoltExecuteInfo info) {
        if (events == null) {
            return;
        }
        Tuple tuple = info.tuple;
        String stream = tuple.getSourceStreamId();
        long now = System.currentTimeMillis();
        switch (stream) {
            case Acker.ACKER_INIT_STREAM_ID: {
                long root = tuple.getLong(0);
                write(now, root, "init", tuple.getLong(1), tuple.getInteger(2), MessageKeys.take(root), tuple);
                break;
            }
            case Acker.ACKER_ACK_STREAM_ID:
                write(now, tuple.getLong(0), "ack", tuple.getLong(1), null, null, tuple);
                break;
            case Acker.ACKER_FAIL_STREAM_ID:
                write(now, tuple.getLong(0), "fail", null, null, null, tuple);
                break;
            case Acker.ACKER_RESET_TIMEOUT_STREAM_ID:
                write(now, tuple.getLong(0), "reset", null, null, null, tuple);
                break;
            case Constants.SYSTEM_TICK_STREAM_ID:
                events.rollIfDue(now);
                if (ackerLog != null) {
                    log(now, "tick", "events_before", sequence);
                    ackerLog.rollIfDue(now);
                }
                break;
            default:
                break;
        }
    }

    @Override
    public void emit(EmitInfo info) {
        if (ackerLog != null) {
            String verdict = verdict(info.stream);
            if (verdict != null) {
                log(System.currentTimeMillis(), verdict, "anchor_id", (Long) info.values.get(0));
            }
        } else if (messageField != null) {
            rememberMessageKey(info.stream, info.values);
        }
    }

    @Override
    public void cleanup() {
        if (events != null) {
            events.close();
        }
        if (ackerLog != null) {
            ackerLog.close();
        }
    }

    /** On the spout's thread: the tuple it emits, then the init that carries its root id. */
    private void rememberMessageKey(String stream, List<Object> values) {
        if (Acker.ACKER_INIT_STREAM_ID.equals(stream)) {
            if (pendingMessageKey != null) {
                MessageKeys.put((Long) values.get(0), pendingMessageKey);
                pendingMessageKey = null;
            }
            return;
        }
        int index = messageFieldIndex.computeIfAbsent(stream, s -> {
            Fields fields = context.getThisOutputFields(s);
            return fields != null && fields.contains(messageField) ? fields.fieldIndex(messageField) : -1;
        });
        pendingMessageKey = index >= 0 ? String.valueOf(values.get(index)) : null;
    }

    private void write(long now, long anchor, String type, Long xor, Integer spoutTask, String messageKey, Tuple tuple) {
        Utf8Line row = line.clear().ascii("{\"anchor_id\": ").number(anchor)
            .ascii(", \"event_type\": \"").ascii(type).ascii("\"");
        if (xor != null) {
            row.ascii(", \"xor_value\": ").number(xor);
        }
        if (spoutTask != null) {
            row.ascii(", \"spout_task\": ").number(spoutTask);
        }
        if (messageKey != null) {
            row.ascii(", \"source_msg_id\": ").quoted(messageKey);
        }
        row.ascii(", \"component\": ").quoted(tuple.getSourceComponent())
            .ascii(", \"event_time\": \"").ascii(time(now))
            .ascii("\", \"event_id\": \"").number(taskId).ascii("-").number(++sequence).ascii("\"}");
        events.write(row, now);
    }

    private void log(long now, String kind, String field, long value) {
        ackerLog.write(line.clear().ascii("{\"kind\": \"").ascii(kind).ascii("\", \"acker_task\": ").number(taskId)
            .ascii(", \"").ascii(field).ascii("\": ").number(value)
            .ascii(", \"at\": \"").ascii(time(now)).ascii("\"}"), now);
    }

    private static String verdict(String stream) {
        switch (stream) {
            case Acker.ACKER_ACK_STREAM_ID:
                return "acked";
            case Acker.ACKER_FAIL_STREAM_ID:
                return "failed";
            default:
                return null;
        }
    }

    private String time(long millis) {
        if (millis != formattedMillis) {
            formattedMillis = millis;
            formattedTime = EVENT_TIME.format(Instant.ofEpochMilli(millis));
        }
        return formattedTime;
    }

    private static long number(Map<String, Object> conf, String key, long fallback) {
        Object value = conf.get(key);
        if (value == null) {
            return fallback;
        }
        try {
            long parsed = Long.parseLong(value.toString());
            if (parsed > 0) {
                return parsed;
            }
        } catch (NumberFormatException e) {
            // refused below with the key and the value
        }
        throw new IllegalArgumentException(key + " must be a positive whole number, not " + value);
    }

    private static String safe(String name) {
        return name.replaceAll("[^A-Za-z0-9._-]", "_");
    }
}
