-- create_late_events.sql
-- What: events that arrived for a tree already resolved, however long before; they change
--       nothing (an anchor gets one outcome). Also the events of an entry without init that an
--       earlier acker, which forgot outcomes after a window, opened for such an anchor: the
--       tick that would have expired it writes them here (tick_epoch), never to expired.
-- Who runs it: `acker init`.
-- Parameters: :table.
-- Invariants: every anchor_id is in completed, failed or expired, resolved by
--             outcome_batch_id <= batch_id; a late event never changes an outcome.
create table if not exists identifier(:table) (
    anchor_id        bigint    comment 'the tuple tree''s root id',
    event_type       string    comment 'init | ack | anchor | fail | reset',
    xor_value        bigint    comment 'the event''s value',
    spout_task       int       comment 'the event''s spout task (init only)',
    source_msg_id    string    comment 'the event''s source message id (init only)',
    component        string    comment 'emitting spout or bolt',
    event_time       timestamp comment 'when the producer emitted it',
    event_id         string    comment 'producer-side id',
    outcome          string    comment 'the earlier outcome: completed | failed | expired',
    outcome_reason   string    comment 'the earlier outcome''s reason',
    outcome_batch_id bigint    comment 'batch that wrote the earlier outcome',
    batch_id         bigint    comment 'micro-batch in which the late event arrived (for a tick''s rows: the batch that last wrote the entry)',
    tick_epoch       bigint    comment 'null when a micro-batch found the event late; else the epoch of the tick that found it, in an entry without init that an earlier acker opened for an anchor that already had an outcome'
)
using delta
comment 'batch acker: late events for already-resolved tuple trees'
