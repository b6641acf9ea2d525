-- select_late_events.sql
-- What: the valid events of this micro-batch whose tree was already resolved, with that outcome.
-- Who runs it: pipelines.engine.process_batch.
-- Parameters: :batch_id.
select
    e.anchor_id,
    e.event_type,
    e.xor_value,
    e.spout_task,
    e.source_msg_id,
    e.component,
    e.event_time,
    e.event_id,
    t.outcome,
    t.outcome_reason,
    t.outcome_batch_id,
    cast(:batch_id as bigint) as batch_id
from classified_events as e
inner join batch_tombstones as t on e.anchor_id = t.anchor_id
where e.quarantine_reason is null
