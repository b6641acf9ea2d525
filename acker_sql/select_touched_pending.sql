-- select_touched_pending.sql
-- What: the rows of pending this micro-batch must read: the trees its valid events name, rows
--       an earlier attempt of this same batch wrote, and rows of trees resolved by an earlier
--       batch (to purge). An anchor with an earlier outcome has no unresolved row here (its
--       events are late, and open none), but in tables an older acker wrote:
--       drop_reborn_entries.sql leaves those out.
-- Who runs it: pipelines.engine.look_up_touched_state, reading the DataFrames {batch_anchors}
--              and {this_batch}; it materialises the result once for the fold.
-- Parameters: :pending (table).
-- Why its own step: the fold reads these rows twice (for seen keys and for the new
--     state); reading pending here once instead of there twice halved the scan of a large
--     pending table. Why without the batch's tombstones: so that it reads pending while
--     find_batch_tombstones.sql reads the outcome tables.
select p.*
from identifier(:pending) as p
left join {batch_anchors} as b on p.anchor_id = b.anchor_id
cross join {this_batch} as this
where b.anchor_id is not null or p.batch_id = this.batch_id or p.outcome is not null
