-- create_batches.sql
-- What: one row per applied micro-batch, written last: a row here means the batch is committed.
-- Who runs it: `acker init`.
-- Parameters: :table.
-- Invariant: events_in = events_applied + duplicates + quarantined + late.
create table if not exists identifier(:table) (
    batch_id         bigint    comment 'the micro-batch id (the stream''s batch id)',
    epoch            bigint    comment 'epoch during the batch',
    started_at       timestamp comment 'wall-clock start',
    finished_at      timestamp comment 'wall-clock end',
    duration_ms      bigint    comment 'finished_at - started_at in milliseconds',
    events_in        bigint    comment 'rows read from ack_events',
    events_applied   bigint    comment 'rows applied to tuple trees',
    duplicates       bigint    comment 're-delivered rows dropped',
    quarantined      bigint    comment 'rows sent to quarantine',
    late             bigint    comment 'rows sent to late_events',
    completed        bigint    comment 'trees completed',
    failed           bigint    comment 'trees failed (including overflow)',
    overflowed       bigint    comment 'trees failed by the capacity guard',
    pending_inserted bigint    comment 'new pending rows',
    pending_removed  bigint    comment 'pending rows resolved and removed'
)
using delta
comment 'batch acker: micro-batch log'
