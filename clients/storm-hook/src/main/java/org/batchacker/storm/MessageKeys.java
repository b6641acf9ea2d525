package org.batchacker.storm;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The spout's message key of each tree, by root id, within one worker. Storm does not send the
 * spout's message id to the acker; a spout task's hook sees, on the spout's thread, the tuple a
 * spout emits and then the {@code __ack_init} that carries the tree's root id, and leaves the
 * key here for the acker task that executes the init. That acker runs in the same worker only
 * when Storm's fields grouping on the root id picks a local acker task (always with one worker).
 * Bounded: keys that no local acker takes are dropped oldest first.
 */
final class MessageKeys {
    static final int CAPACITY = 100_000;

    private static final Map<Long, String> KEYS = new LinkedHashMap<>(1024, 0.75f, false) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, String> eldest) {
            return size() > CAPACITY;
        }
    };

    private MessageKeys() {}

    static void put(long rootId, String key) {
        synchronized (KEYS) {
            KEYS.put(rootId, key);
        }
    }

    /** The key left for {@code rootId}, or null; taken, so each is read once. */
    static String take(long rootId) {
        synchronized (KEYS) {
            return KEYS.remove(rootId);
        }
    }
}
