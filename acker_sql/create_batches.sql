-- create_batches.sql
-- What: one row per micro-batch, written once, as the batch's last write (status
--       `committed`). A batch interrupted before it is recognised by the rows it wrote
--       (find_unfinished_batch.sql), and the next `acker run` finishes it. A `started` row
--       is left only by an older acker, which wrote one before each batch.
-- Who runs it: `acker init`.
-- Parameters: :table.
-- Invariants: one row per batch_id; for committed rows
--             events_in = events_applied + duplicates + quarantined + late.
create table if not exists identifier(:table) (
    batch_id          bigint    comment 'the micro-batch id (the stream''s batch id)',
    status            string    comment 'committed (started: a batch an older acker began)',
    epoch             bigint    comment 'epoch during the batch',
    input_fingerprint string    comment 'row count and content hash of the batch''s input, to recognise a replay',
    started_at        timestamp comment 'wall-clock start',
    finished_at       timestamp comment 'wall-clock end (null while started)',
    duration_ms       bigint    comment 'finished_at - started_at in milliseconds',
    events_in         bigint    comment 'rows read from ack_events',
    events_applied    bigint    comment 'rows applied to tuple trees',
    duplicates        bigint    comment 're-delivered rows dropped',
    quarantined       bigint    comment 'rows sent to quarantine',
    late              bigint    comment 'rows sent to late_events',
    completed         bigint    comment 'trees completed',
    failed            bigint    comment 'trees failed (including overflow)',
    overflowed        bigint    comment 'trees failed by the capacity guard',
    pending_inserted  bigint    comment 'new pending rows',
    pending_removed   bigint    comment 'pending rows resolved and removed',
    through_epoch     bigint    comment 'the last epoch whose events the batch applied: epoch, or a later one for a pass over several epochs, whose ticks follow it'
)
using delta
comment 'batch acker: micro-batch log'
