-- select_fold_events.sql
-- What: the micro-batch's events the fold applies or finds re-delivered: its valid events,
--       but those late for a tree resolved before the batch, however long before.
-- Who runs it: pipelines.engine.fold_events, reading {classified_events} (with `event_epoch`)
--              and {batch_tombstones}; its rows go to the fold's second and third rules
--              (pipelines.engine.epoch_parts).
-- Parameters: none.
-- Why distributed by anchor: one shuffle by anchor serves both of those rules' aggregations
--     (without it the events are shuffled per (anchor, type, value) and again per anchor,
--     about 40% of the aggregate), and the rules in Java read the same partitions.
select e.*
from {classified_events} as e
left anti join {batch_tombstones} as t on e.anchor_id = t.anchor_id
where e.quarantine_reason is null
distribute by e.anchor_id
