-- create_outcome_table.sql
-- What: one outcome table: completed (reason acked), failed (fail | overflow) or expired (timeout | no_init).
-- Who runs it: `acker init`.
-- Parameters: :table, one of the qualified completed, failed and expired table names.
-- Invariants: anchor_id appears once across completed, failed and expired (per resolution).
create table if not exists identifier(:table) (
    anchor_id        bigint    comment 'the tuple tree''s root id',
    spout_task       int       comment 'spout task to notify (null when the init never came)',
    source_msg_id    string    comment 'spout message id, what a replayer re-emits',
    reason           string    comment 'acked | fail | overflow | timeout | no_init',
    init_time        timestamp comment 'event_time of the init event',
    first_event_time timestamp comment 'earliest event_time applied to the tree',
    last_event_time  timestamp comment 'latest event_time applied to the tree',
    latency_ms       bigint    comment 'last_event_time - first_event_time, in milliseconds',
    event_count      bigint    comment 'events applied to the tree (duplicates excluded)',
    batch_id         bigint    comment 'micro-batch that resolved it (for expired: the last batch before the tick)',
    epoch            bigint    comment 'epoch at resolution',
    resolved_at      timestamp comment 'wall-clock time of the micro-batch or tick that resolved it, one per batch or tick'
)
using delta
comment 'batch acker outcome: resolved tuple trees'
