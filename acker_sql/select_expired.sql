-- select_expired.sql
-- What: the pending trees a tick expires: stamped with an epoch e such that e + buckets <= the
--       new epoch. Reason timeout, or no_init when the init never came.
-- Who runs it: pipelines.engine.tick.
-- Parameters: :pending (table); :cutoff = new epoch - buckets; :epoch, the new epoch;
--             :last_batch_id.
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
    cast(:epoch as bigint) as epoch,
    current_timestamp() as resolved_at
from identifier(:pending)
where outcome is null and epoch <= :cutoff
