package org.batchacker.fold;

import java.nio.charset.StandardCharsets;
import java.sql.Timestamp;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction2;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.XXH64;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The fold's second and third rules (mark_redeliveries.sql, then aggregate_epochs.sql) in one
 * pass over each partition's events, sorted by anchor, type, value and epoch: the same rows,
 * each anchor's epoch parts, without Spark's sort aggregates (which interpret their aggregate
 * functions, partially then finally, for every key and again for every epoch). The SQL files
 * stay the definition: tests/test_steps.py runs both on the same hand-made rows.
 */
public final class EpochParts {
  private EpochParts() {}

  private static final StructType PART = new StructType()
      .add("epoch", DataTypes.LongType)
      .add("xor_delta", DataTypes.LongType)
      .add("saw_init", DataTypes.BooleanType)
      .add("saw_fail", DataTypes.BooleanType)
      .add("saw_reset", DataTypes.BooleanType)
      .add("applied", DataTypes.LongType)
      .add("rows_in", DataTypes.LongType)
      .add("duplicates", DataTypes.LongType)
      .add("other_key", DataTypes.BooleanType)
      .add("init_spout_task", DataTypes.IntegerType)
      .add("init_source_msg_id", DataTypes.StringType)
      .add("init_time", DataTypes.TimestampType)
      .add("first_time", DataTypes.TimestampType)
      .add("last_time", DataTypes.TimestampType)
      .add("new_keys", DataTypes.createArrayType(DataTypes.LongType, false));

  /** aggregate_epochs.sql's output: each anchor with events, its parts in epoch order. */
  public static final StructType OUTPUT = new StructType()
      .add("anchor_id", DataTypes.LongType)
      .add("parts", DataTypes.createArrayType(PART, false));

  private static final long SEED = 42L;

  /** Spark's xxhash64(event_type, xor_value), which skips a null value. */
  static long eventKey(String type, boolean noValue, long value) {
    byte[] bytes = type.getBytes(StandardCharsets.UTF_8);
    long hash = XXH64.hashUnsafeBytes(bytes, Platform.BYTE_ARRAY_OFFSET, bytes.length, SEED);
    return noValue ? hash : XXH64.hashLong(value, hash);
  }

  private static final long INIT_OF_ZERO = eventKey("init", false, 0L);

  private static boolean valued(String type) {
    return type.equals("init") || type.equals("ack") || type.equals("anchor");
  }

  /**
   * Each anchor's epoch parts. {@code events}: the batch's valid events that are not late
   * (anchor_id, event_type, xor_value, event_epoch, event_time, spout_task, source_msg_id);
   * {@code baseKeys}: the keys each touched tree already applied (anchor_id, applied_keys).
   */
  public static Dataset<Row> of(SparkSession spark, Dataset<Row> events, Dataset<Row> baseKeys) {
    int partitions = Integer.parseInt(spark.conf().get("spark.sql.shuffle.partitions"));
    JavaRDD<Row> sortedEvents = events
        .select("anchor_id", "event_type", "xor_value", "event_epoch", "event_time",
            "spout_task", "source_msg_id")
        .repartition(partitions, functions.col("anchor_id"))
        .sortWithinPartitions("anchor_id", "event_type", "xor_value", "event_epoch")
        .javaRDD();
    JavaRDD<Row> sortedKeys = baseKeys
        .select("anchor_id", "applied_keys")
        .repartition(partitions, functions.col("anchor_id"))
        .sortWithinPartitions("anchor_id")
        .javaRDD();
    // Spark plans an empty side (no touched trees) as no partitions at all.
    JavaRDD<Row> folded = sortedKeys.getNumPartitions() == 0
        ? sortedEvents.mapPartitions(rows -> new Folder(rows, Collections.emptyIterator()))
        : sortedEvents.zipPartitions(sortedKeys, (FlatMapFunction2<Iterator<Row>, Iterator<Row>,
            Row>) Folder::new);
    return spark.createDataFrame(folded, OUTPUT);
  }

  /** One partition's anchors, each folded from its run of sorted events. */
  private static final class Folder implements Iterator<Row> {
    private final Iterator<Row> events;
    private final Iterator<Row> keys;
    private Row event;
    private Row keyRow;

    Folder(Iterator<Row> events, Iterator<Row> keys) {
      this.events = events;
      this.keys = keys;
      this.event = events.hasNext() ? events.next() : null;
      this.keyRow = keys.hasNext() ? keys.next() : null;
    }

    @Override
    public boolean hasNext() {
      return event != null;
    }

    private void advance() {
      event = events.hasNext() ? events.next() : null;
    }

    /** Whether the next event is the anchor's (type, value), in any epoch. */
    private boolean atKey(long anchor, String type, boolean noValue, long value) {
      return event != null && event.getLong(0) == anchor && event.getString(1).equals(type)
          && event.isNullAt(2) == noValue && (noValue || event.getLong(2) == value);
    }

    /** The sorted keys the anchor's tree already applied (none for a new tree). */
    private long[] appliedKeys(long anchor) {
      while (keyRow != null && keyRow.getLong(0) < anchor) {
        keyRow = keys.hasNext() ? keys.next() : null;
      }
      if (keyRow == null || keyRow.getLong(0) != anchor || keyRow.isNullAt(1)) {
        return new long[0];
      }
      List<Long> held = keyRow.getList(1);
      long[] sorted = new long[held.size()];
      for (int i = 0; i < sorted.length; i++) {
        sorted[i] = held.get(i);
      }
      Arrays.sort(sorted);
      return sorted;
    }

    @Override
    public Row next() {
      if (event == null) {
        throw new NoSuchElementException();
      }
      long anchor = event.getLong(0);
      long[] applied = appliedKeys(anchor);
      List<Part> parts = new ArrayList<>();
      while (event != null && event.getLong(0) == anchor) {
        String type = event.getString(1);
        boolean noValue = event.isNullAt(2);
        long value = noValue ? 0L : event.getLong(2);
        long key = eventKey(type, noValue, value);
        boolean heldBefore = valued(type) && Arrays.binarySearch(applied, key) >= 0;
        boolean firstEpoch = true;
        // one (type, value): its epochs in order, each a key of its own
        while (atKey(anchor, type, noValue, value)) {
          long epoch = event.getLong(3);
          Key copies = new Key();
          while (atKey(anchor, type, noValue, value) && event.getLong(3) == epoch) {
            copies.add(event);
            advance();
          }
          // a key its tree applied before, or in an earlier epoch of this pass: a re-delivery
          boolean seenBefore = valued(type) && (heldBefore || !firstEpoch);
          partOf(parts, epoch).add(type, value, key, copies, seenBefore);
          firstEpoch = false;
        }
      }
      parts.sort((a, b) -> Long.compare(a.epoch, b.epoch));
      Row[] rows = new Row[parts.size()];
      for (int i = 0; i < rows.length; i++) {
        rows[i] = parts.get(i).row();
      }
      return RowFactory.create(anchor, rows);
    }

    private static Part partOf(List<Part> parts, long epoch) {
      for (Part part : parts) {
        if (part.epoch == epoch) {
          return part;
        }
      }
      Part part = new Part(epoch);
      parts.add(part);
      return part;
    }
  }

  /**
   * Whether a copy of an init (time, message id, spout task) comes after another, as the SQL's
   * max_by orders struct(time, source_msg_id, spout_task): the later time, then the greater
   * message id (by its UTF-8 bytes), then the greater task, a null below any value. The same
   * copy wins whichever order the copies arrive in.
   */
  static boolean copyAfter(Timestamp time, String msg, Integer task, Timestamp than,
      String thanMsg, Integer thanTask) {
    int byTime = time.compareTo(than);
    if (byTime != 0) {
      return byTime > 0;
    }
    int byMsg = msg == null || thanMsg == null
        ? nullsFirst(msg == null, thanMsg == null)
        : UTF8String.fromString(msg).binaryCompare(UTF8String.fromString(thanMsg));
    if (byMsg != 0) {
      return byMsg > 0;
    }
    return task == null || thanTask == null
        ? nullsFirst(task == null, thanTask == null) > 0
        : task > thanTask;
  }

  /** The order of two values of which one at least is null: a null below any value. */
  private static int nullsFirst(boolean isNull, boolean thanIsNull) {
    return isNull == thanIsNull ? 0 : isNull ? -1 : 1;
  }

  /** mark_redeliveries.sql's row: one key's copies in one epoch. */
  private static final class Key {
    long copies;
    Timestamp first;
    Timestamp last;
    Integer spoutTask;
    String sourceMsgId;

    void add(Row event) {
      copies++;
      Timestamp time = event.getTimestamp(4);
      if (time == null) {
        return;
      }
      if (first == null || time.before(first)) {
        first = time;
      }
      Integer task = event.isNullAt(5) ? null : event.getInt(5);
      String msg = event.getString(6);
      if (last == null || copyAfter(time, msg, task, last, sourceMsgId, spoutTask)) {
        last = time;
        spoutTask = task;
        sourceMsgId = msg;
      }
    }
  }

  /** aggregate_epochs.sql's aggregates of one anchor's keys in one epoch. */
  private static final class Part {
    final long epoch;
    long xorDelta;
    boolean sawInit;
    boolean sawFail;
    boolean sawReset;
    long applied;
    long rowsIn;
    long duplicates;
    boolean otherKey;
    Integer initSpoutTask;
    String initSourceMsgId;
    Timestamp initLast;
    Timestamp initTime;
    Timestamp firstTime;
    Timestamp lastTime;
    long[] newKeys = new long[4];
    int newKeyCount;

    Part(long epoch) {
      this.epoch = epoch;
    }

    void add(String type, long value, long key, Key copies, boolean seenBefore) {
      boolean resets = type.equals("fail") || type.equals("reset");
      rowsIn += copies.copies;
      applied += resets ? copies.copies : seenBefore ? 0 : 1;
      duplicates += resets ? 0 : seenBefore ? copies.copies : copies.copies - 1;
      sawFail |= type.equals("fail");
      sawReset |= type.equals("reset");
      if (seenBefore) {
        return;
      }
      firstTime = earlier(copies.first, firstTime);
      lastTime = later(copies.last, lastTime);
      if (valued(type)) {
        xorDelta ^= value;
        if (newKeyCount == newKeys.length) {
          newKeys = Arrays.copyOf(newKeys, newKeyCount * 2);
        }
        newKeys[newKeyCount++] = key;
        otherKey |= key != INIT_OF_ZERO;
      }
      if (type.equals("init")) {
        sawInit = true;
        initTime = earlier(copies.first, initTime);
        if (copies.last != null && (initLast == null || copyAfter(copies.last,
            copies.sourceMsgId, copies.spoutTask, initLast, initSourceMsgId, initSpoutTask))) {
          initLast = copies.last;
          initSpoutTask = copies.spoutTask;
          initSourceMsgId = copies.sourceMsgId;
        }
      }
    }

    Row row() {
      long[] keys = Arrays.stream(newKeys, 0, newKeyCount).sorted().distinct().toArray();
      Long[] boxed = new Long[keys.length];
      for (int i = 0; i < keys.length; i++) {
        boxed[i] = keys[i];
      }
      return RowFactory.create(epoch, xorDelta, sawInit, sawFail, sawReset, applied, rowsIn,
          duplicates, otherKey, initSpoutTask, initSourceMsgId, initTime, firstTime, lastTime,
          boxed);
    }

    private static Timestamp earlier(Timestamp time, Timestamp than) {
      return time != null && (than == null || time.before(than)) ? time : than;
    }

    private static Timestamp later(Timestamp time, Timestamp than) {
      return time != null && (than == null || time.after(than)) ? time : than;
    }
  }
}
