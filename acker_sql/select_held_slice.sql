-- select_held_slice.sql
-- What: the staged events a slice applies: staged by stream batch :stream_batch_id or earlier,
--       and with a time in epoch :epoch or before: the arrival under processing_time, else the
--       event time (a null event_time, or a row the stager marked for quarantine, is
--       quarantined by the slice, so it goes with the first one), each with the epoch it is
--       applied in: its time's, or the slice's first epoch :first_epoch if that is later (an
--       event later than the watermark of the stream batches before it, or quarantined).
-- Who runs it: pipelines.clock (the drain).
-- Parameters: :held_events (table); :stream_batch_id; :first_epoch; :epoch, the slice's last
--             epoch; :origin_us and :interval_us (see held_epoch.sql).
select
    anchor_id,
    event_type,
    xor_value,
    spout_task,
    source_msg_id,
    component,
    event_time,
    event_id,
    quarantine_reason as staged_reason,
    case
        when quarantine_reason is null
            then greatest(coalesce({{include held_epoch}}, :first_epoch), :first_epoch)
        else cast(:first_epoch as bigint)
    end as event_epoch
from identifier(:held_events)
where {{include held_slice_rows}}
