-- select_held_slice.sql
-- What: the staged events a slice applies: staged by stream batch :stream_batch_id or earlier,
--       and with a time in epoch :epoch or before: the arrival under processing_time, else the
--       event time (a null event_time, or a row the stager marked for quarantine, is
--       quarantined by the slice, so it goes with the first one).
-- Who runs it: pipelines.staging.
-- Parameters: :held_events (table); :stream_batch_id; :epoch; :origin_us and :interval_us,
--             the time (microseconds since 1970) at which epoch 0 starts and the epoch's
--             length.
select
    anchor_id,
    event_type,
    xor_value,
    spout_task,
    source_msg_id,
    component,
    event_time,
    event_id,
    quarantine_reason as staged_reason
from identifier(:held_events)
where {{include held_slice_rows}}
