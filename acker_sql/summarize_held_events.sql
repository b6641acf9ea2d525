-- summarize_held_events.sql
-- What: what held_events holds, per epoch of its rows' times (the arrival under
--       processing_time, else the event time): the rows, the newest stream batch, the earliest
--       and latest time; and one row with a null epoch for the rows every slice takes (marked
--       for quarantine by the stager, or without a time), whose times never move the clock.
-- Who runs it: pipelines.clock's drain, once (and once more after an interrupted slice it
--              finishes first, which takes only the rows staged up to its stream batch): a
--              slice removes exactly the rows of its epochs, so the drain follows what is left
--              from these rows instead of reading the table after each pass.
-- Parameters: :held_events (table); :stream_batch_id, the newest stream batch counted (null:
--             all); :origin_us and :interval_us (see held_epoch.sql).
with timed as (
    select
        stream_batch_id,
        case
            when quarantine_reason is null then unix_micros(coalesce(arrived_at, event_time))
        end as micros,
        case when quarantine_reason is null then {{include held_epoch}} end as epoch
    from identifier(:held_events)
    where stream_batch_id <= coalesce(:stream_batch_id, stream_batch_id)
)

select
    epoch,
    count(*) as rows,
    max(stream_batch_id) as newest,
    min(micros) as earliest_us,
    max(micros) as latest_us
from timed
group by epoch
