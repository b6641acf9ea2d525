-- drop_reborn_entries.sql
-- What: the touched rows of pending without the entries an older acker opened for an anchor
--       that already had an outcome (it forgot outcomes after a window of epochs): unresolved
--       rows of an earlier batch whose anchor has a tombstone. The batch's events for such an
--       anchor are late, and its entry stays for the ticks (reborn_entries.sql).
-- Who runs it: pipelines.engine.look_up_touched_state, on a `pending` without the property
--              batchacker.reborn_entries = 'none', reading the DataFrames {touched_pending}
--              (select_touched_pending.sql), {batch_tombstones} and {this_batch}.
select p.*
from {touched_pending} as p
cross join {this_batch} as this
left anti join {batch_tombstones} as t
    on p.anchor_id = t.anchor_id and p.batch_id <> this.batch_id and p.outcome is null
