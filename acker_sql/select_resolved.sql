-- select_resolved.sql
-- What: the outcome rows of the trees that resolved in this micro-batch, for one outcome table.
-- Who runs it: pipelines.engine.plan_batch, once for completed and once for failed.
-- Reads: {batch_state}, the folded state.
-- Parameters: :outcome, completed | failed.
-- Note: `epoch` is the epoch whose events resolved the tree (the batch's own, except in a
--       pass over several epochs).
select
    anchor_id,
    spout_task,
    source_msg_id,
    reason,
    init_time,
    first_event_time,
    last_event_time,
    timestampdiff(millisecond, first_event_time, last_event_time) as latency_ms,
    event_count,
    batch_id,
    last_epoch as epoch,
    written_at as resolved_at
from {batch_state}
where outcome = :outcome
