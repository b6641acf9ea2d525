-- create_ticks.sql
-- What: one row per tick; the current epoch is the largest epoch here (0 before the first tick).
-- Who runs it: `acker init`.
-- Parameters: :table.
-- Invariants: one row per epoch, epochs 1, 2, 3, ... without gaps.
create table if not exists identifier(:table) (
    epoch           bigint    comment 'the epoch this tick made current',
    ticked_at       timestamp comment 'wall-clock time of the tick; under processing_time, the start of its epoch on the clock''s grid',
    clock           string    comment 'what triggered it: manual | processing_time | event_time',
    expired_timeout bigint    comment 'trees expired with reason timeout',
    expired_no_init bigint    comment 'trees expired with reason no_init',
    last_batch_id   bigint    comment 'last micro-batch applied before the tick (-1 if none)',
    late_no_init    bigint    comment 'entries without init that an earlier acker opened for anchors that already had an outcome: their events went to late_events, not to expired'
)
using delta
comment 'batch acker: epoch ticks'
