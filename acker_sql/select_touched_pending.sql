-- select_touched_pending.sql
-- What: the rows of pending this micro-batch must read: the trees its valid, non-late events
--       touch, rows an earlier attempt of this same batch wrote, and rows of trees resolved by
--       an earlier batch (to purge).
-- Who runs it: pipelines.engine.plan_batch, reading the DataFrames {batch_anchors} and
--              {batch_tombstones}; it materialises the result once for the fold.
-- Parameters: :pending (table); :batch_id.
-- Why its own step: the fold reads these rows twice (for seen keys and for the new
--     state); reading pending here once instead of there twice halved the scan of a large
--     pending table.
with live_anchors as (
    select b.anchor_id
    from {batch_anchors} as b
    left anti join {batch_tombstones} as t on b.anchor_id = t.anchor_id
)

select p.*
from identifier(:pending) as p
left join live_anchors as b on p.anchor_id = b.anchor_id
where b.anchor_id is not null or p.batch_id = :batch_id or p.outcome is not null
