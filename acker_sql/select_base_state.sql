-- select_base_state.sql
-- What: the first rule of the fold: each pending row a micro-batch touches as the state its
--       events fold into. The base state is the opaque transactional one: a row written by
--       this same batch id (an earlier, interrupted or replayed attempt) contributes its `prev`
--       values, any other unresolved row its current values. So applying a batch again, with
--       the same or different content, gives what one application would.
-- Who runs it: pipelines.engine.fold_events, reading {touched_pending} (the rows of pending
--              the batch touches, from select_touched_pending.sql) and {this_batch}.
-- Output: per touched anchor, `base` (null for a tree resolved by an earlier batch, or new in
--         an earlier attempt of this one), `resolved_earlier`, and `pending_adjust`: pending
--         before this batch minus pending in the table now, for this row.
select
    anchor_id,
    case
        when p.batch_id = this.batch_id then prev
        when outcome is null then named_struct(
            'checksum', checksum,
            'has_init', has_init,
            'failed', failed,
            'spout_task', spout_task,
            'source_msg_id', source_msg_id,
            'init_time', init_time,
            'first_event_time', first_event_time,
            'last_event_time', last_event_time,
            'event_count', event_count,
            'epoch', epoch,
            'applied_keys', applied_keys
        )
    end as base,
    outcome is not null and p.batch_id < this.batch_id as resolved_earlier,
    cast(p.batch_id = this.batch_id and prev is not null as int)
    - cast(p.batch_id = this.batch_id and outcome is null as int) as pending_adjust
from {touched_pending} as p
cross join {this_batch} as this
