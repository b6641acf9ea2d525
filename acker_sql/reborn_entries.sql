-- reborn_entries.sql
-- What: the entries without init that a run of ticks expires although their anchor already has
--       an outcome from before the run: an earlier acker, which forgot outcomes after a window
--       of epochs, opened a new entry for an event after it, and no init followed. Per such
--       anchor, its latest earlier outcome.
--       An anchor gets one outcome, so these never reach `expired`: the tick leaves them out,
--       and select_reborn_late_events.sql writes their events to late_events.
-- Who runs it: pipelines.engine.tick, only when the run expires an entry without init, reading
--              the DataFrame {outcome_anchors} (select_outcome_anchors.sql, or what the writer
--              keeps of it); select_reborn_late_events.sql reads its result.
-- Parameters: :pending (table); :first_epoch and :target, the epochs the run's first and last
--             ticks make current; :buckets.
-- Why before :first_epoch: the run's own expired rows (written by an attempt that crashed)
--     are not earlier outcomes.
select
    r.anchor_id,
    max_by(r.outcome, r.batch_id) as outcome,
    max_by(r.reason, r.batch_id) as outcome_reason,
    max(r.batch_id) as outcome_batch_id
from {outcome_anchors} as r
left semi join identifier(:pending) as p
    on r.anchor_id = p.anchor_id
    and p.outcome is null
    and not p.has_init
    and p.epoch + :buckets <= :target
where r.epoch < :first_epoch
group by r.anchor_id
