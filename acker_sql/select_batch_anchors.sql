-- select_batch_anchors.sql
-- What: the distinct anchors of the micro-batch's valid events.
-- Who runs it: pipelines.engine.look_up_touched_state, reading the DataFrame {batch_by_anchor}
--              (group_batch_by_anchor.sql, materialised), for find_batch_tombstones and
--              select_touched_pending, which run side by side.
-- Parameters: none.
select anchor_id from {batch_by_anchor} where has_valid_event
