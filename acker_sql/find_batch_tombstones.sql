-- find_batch_tombstones.sql
-- What: the micro-batch's anchors that are not live but were resolved by an earlier batch or tick
--       within the tombstone window; their events are late and change nothing.
-- Who runs it: pipelines.engine.process_batch.
-- Parameters: :pending, :completed, :failed, :expired (tables); :batch_id; :min_epoch, the
--             oldest epoch still remembered (current epoch - tombstone_epochs).
with batch_anchors as (
    select distinct anchor_id from classified_events where quarantine_reason is null
),

live as (
    select p.anchor_id
    from identifier(:pending) as p
    left semi join batch_anchors as b on p.anchor_id = b.anchor_id
),

resolved as (
    select anchor_id, 'completed' as outcome, reason, batch_id, epoch from identifier(:completed)
    union all
    select anchor_id, 'failed' as outcome, reason, batch_id, epoch from identifier(:failed)
    union all
    select anchor_id, 'expired' as outcome, reason, batch_id, epoch from identifier(:expired)
),

remembered as (
    select r.*
    from resolved as r
    left semi join batch_anchors as b on r.anchor_id = b.anchor_id
    where r.epoch >= :min_epoch and r.batch_id < :batch_id
),

final as (
    select
        r.anchor_id,
        max_by(r.outcome, r.batch_id) as outcome,
        max_by(r.reason, r.batch_id) as outcome_reason,
        max(r.batch_id) as outcome_batch_id
    from remembered as r
    left anti join live as l on r.anchor_id = l.anchor_id
    group by r.anchor_id
)

select * from final
