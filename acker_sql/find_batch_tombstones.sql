-- find_batch_tombstones.sql
-- What: the micro-batch's anchors that were resolved by an earlier batch or tick within the
--       tombstone window; their events are late and change nothing. Outcome rows of this same
--       batch id (an earlier attempt of it) are not tombstones: the batch recomputes them.
-- Who runs it: pipelines.engine.plan_batch, reading the DataFrames {batch_anchors} and
--              {window_outcomes} (select_window_outcomes.sql, or what the writer keeps of it).
-- Parameters: :batch_id; :min_epoch, the oldest epoch still remembered for the batch's first
--             epoch (its epoch - tombstone_epochs).
-- Output: per anchor, its latest outcome and that outcome's epoch, against which each event's
--         own epoch decides whether it is late (aggregate_batch.sql, select_late_events.sql).
-- Why no check against pending: a tree with a remembered outcome never re-enters pending,
--             because its events are late for as long as the outcome is remembered.
with remembered as (
    select r.*
    from {window_outcomes} as r
    left semi join {batch_anchors} as b on r.anchor_id = b.anchor_id
    where r.epoch >= :min_epoch and r.batch_id < :batch_id
),

final as (
    select
        anchor_id,
        max_by(outcome, batch_id) as outcome,
        max_by(reason, batch_id) as outcome_reason,
        max(batch_id) as outcome_batch_id,
        max_by(epoch, batch_id) as outcome_epoch
    from remembered
    group by anchor_id
)

select * from final
