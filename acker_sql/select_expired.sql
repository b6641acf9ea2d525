-- select_expired.sql
-- What: the pending trees that a run of ticks, from the current epoch to :target, expires. A tree
--       stamped with epoch e expires at the tick that makes the epoch e + buckets, so each row
--       carries that tick's epoch (never before the first tick of the run). Reason timeout, or
--       no_init when the init never came. `reborn` marks an entry without init whose anchor
--       already has an outcome (reborn_entries.sql): it is not written to `expired`.
-- Who runs it: pipelines.engine.tick.
-- Parameters: :pending, :completed, :failed, :expired (tables); :first_epoch and :target, the
--             epochs the run's first and last ticks make current; :buckets; :last_batch_id.
-- Why one statement for many ticks: no batch runs between the ticks of one run, so no stamp
--     changes between them and each tree's expiry tick follows from its stamp alone.
select
    p.anchor_id,
    p.spout_task,
    p.source_msg_id,
    case when p.has_init then 'timeout' else 'no_init' end as reason,
    p.init_time,
    p.first_event_time,
    p.last_event_time,
    timestampdiff(millisecond, p.first_event_time, p.last_event_time) as latency_ms,
    p.event_count,
    cast(:last_batch_id as bigint) as batch_id,
    greatest(p.epoch + :buckets, cast(:first_epoch as bigint)) as epoch,
    current_timestamp() as resolved_at,
    r.anchor_id is not null as reborn
from identifier(:pending) as p
left join {{include reborn_entries}} as r on p.anchor_id = r.anchor_id
where p.outcome is null and p.epoch + :buckets <= :target
