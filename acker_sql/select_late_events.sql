-- select_late_events.sql
-- What: the valid events of this micro-batch whose tree was already resolved, with that outcome:
--       resolved before the batch, however long before, or, in a pass over several epochs, by
--       an earlier epoch of the pass (its `late_from`).
-- Who runs it: pipelines.engine.plan_batch.
-- Reads: the DataFrames {this_batch}, {classified_events}, {batch_tombstones} and
--        {late_state}: the rows of the folded state whose later events the pass did not apply
--        (`late_from` set), few enough in most passes for the engine to broadcast them, so
--        that the batch's events are not shuffled to meet them.
with late as (
    select
        e.*,
        t.outcome,
        t.outcome_reason,
        t.outcome_batch_id
    from {classified_events} as e
    inner join {batch_tombstones} as t on e.anchor_id = t.anchor_id
    where e.quarantine_reason is null

    union all

    select
        e.*,
        s.late_outcome as outcome,
        s.late_reason as outcome_reason,
        this.batch_id as outcome_batch_id
    from {classified_events} as e
    inner join {late_state} as s on e.anchor_id = s.anchor_id and e.event_epoch >= s.late_from
    cross join {this_batch} as this
    where e.quarantine_reason is null
)

select
    anchor_id,
    event_type,
    xor_value,
    spout_task,
    source_msg_id,
    component,
    event_time,
    event_id,
    outcome,
    outcome_reason,
    outcome_batch_id,
    this.batch_id,
    cast(null as bigint) as tick_epoch
from late
cross join {this_batch} as this
