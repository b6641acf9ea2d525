-- create_held_events.sql
-- What: under the event_time and processing_time clocks, the stream's micro-batches staged
--       here until the watermark lets them be applied in time order (event time, or arrival);
--       rows leave as the micro-batch that applies them commits. Empty under the manual clock.
-- Who runs it: `acker init`.
-- Parameters: :table.
-- Invariants: a row of stream batch N is applied by a micro-batch with id >= N * 2^20, in
--             the epoch of its time (or the current one, if that epoch has passed).
create table if not exists identifier(:table) (
    anchor_id       bigint    comment 'as in ack_events',
    event_type      string    comment 'as in ack_events',
    xor_value       bigint    comment 'as in ack_events',
    spout_task      int       comment 'as in ack_events',
    source_msg_id   string    comment 'as in ack_events',
    component       string    comment 'as in ack_events',
    event_time      timestamp comment 'as in ack_events',
    event_id        string    comment 'as in ack_events',
    stream_batch_id bigint    comment 'the micro-batch of the stream over ack_events that staged it',
    quarantine_reason string  comment 'set when staged: event_time_in_future | event_time_far_from_batch (then the next micro-batch quarantines it); null otherwise',
    arrived_at      timestamp comment 'processing_time clock: when its row was committed to ack_events; null under event_time'
)
using delta
comment 'batch acker: events staged by the event_time and processing_time clocks until their epoch comes'
