-- find_batch_tombstones.sql
-- What: the micro-batch's anchors that were resolved by an earlier batch or tick, however long
--       ago: an anchor gets one outcome, so its events are late and change nothing. Outcome
--       rows of this same batch id (an earlier attempt of it) are not tombstones: the batch
--       recomputes them.
-- Who runs it: pipelines.engine.plan_batch, reading the DataFrames {batch_anchors},
--              {outcome_anchors} (select_outcome_anchors.sql, or what the writer keeps of it)
--              and {this_batch}.
-- Output: per anchor, its latest outcome, for the late_events rows of its events
--         (mark_redeliveries.sql leaves them out, select_late_events.sql writes them).
-- Why no check against pending: a tree with an outcome never re-enters pending, because its
--             events are late.
-- Why the earlier batches' rows are picked by FILTER clauses, not a WHERE: Delta would take a
--     WHERE on batch_id to skip files by their statistics, one Spark job per outcome table,
--     and every file holds earlier batches' rows, so none would be skipped.
with remembered as (
    select r.*, this.batch_id as this_batch_id
    from {outcome_anchors} as r
    left semi join {batch_anchors} as b on r.anchor_id = b.anchor_id
    cross join {this_batch} as this
),

final as (
    select
        anchor_id,
        max_by(outcome, batch_id) filter (where batch_id < this_batch_id) as outcome,
        max_by(reason, batch_id) filter (where batch_id < this_batch_id) as outcome_reason,
        max(batch_id) filter (where batch_id < this_batch_id) as outcome_batch_id
    from remembered
    group by anchor_id
)

select * from final where outcome_batch_id is not null
