-- select_expired.sql
-- What: the pending trees that a run of ticks, from the current epoch to :target, expires. A tree
--       stamped with epoch e expires at the tick that makes the epoch e + buckets, so each row
--       carries that tick's epoch (never before the first tick of the run). Reason timeout, or
--       no_init when the init never came.
-- Who runs it: pipelines.engine.tick.
-- Parameters: :pending (table); :first_epoch and :target, the epochs the run's first and last
--             ticks make current; :buckets; :last_batch_id.
-- Why one statement for many ticks: no batch runs between the ticks of one run, so no stamp
--     changes between them and each tree's expiry tick follows from its stamp alone.
select
    anchor_id,
    spout_task,
    source_msg_id,
    case when has_init then 'timeout' else 'no_init' end as reason,
    init_time,
    first_event_time,
    last_event_time,
    timestampdiff(millisecond, first_event_time, last_event_time) as latency_ms,
    event_count,
    cast(:last_batch_id as bigint) as batch_id,
    greatest(epoch + :buckets, cast(:first_epoch as bigint)) as epoch,
    current_timestamp() as resolved_at
from identifier(:pending)
where outcome is null and epoch + :buckets <= :target
