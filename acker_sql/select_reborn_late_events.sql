-- select_reborn_late_events.sql
-- What: the late_events rows of the entries a run of ticks does not expire because their anchor
--       already has an outcome (reborn_entries.sql): each valid ack_events row of the anchor
--       dated within the entry's first and last event time, with that earlier outcome, the
--       batch that last wrote the entry, and the epoch of the tick that found it.
-- Who runs it: pipelines.engine.tick, only when reborn_entries.sql found such an entry (the
--              DataFrame {reborn_entries}): it reads ack_events whole.
-- Parameters: :pending, :ack_events (tables); :first_epoch; :target; :buckets.
with valid_events as (
    select * from identifier(:ack_events) where {{include input_contract}} is null
),

entries as (
    select
        p.anchor_id,
        p.first_event_time,
        p.last_event_time,
        p.batch_id,
        greatest(p.epoch + :buckets, cast(:first_epoch as bigint)) as tick_epoch,
        r.outcome,
        r.outcome_reason,
        r.outcome_batch_id
    from identifier(:pending) as p
    inner join {reborn_entries} as r on p.anchor_id = r.anchor_id
    where p.outcome is null and p.epoch + :buckets <= :target
),

final as (
    select
        e.anchor_id,
        e.event_type,
        e.xor_value,
        e.spout_task,
        e.source_msg_id,
        e.component,
        e.event_time,
        e.event_id,
        x.outcome,
        x.outcome_reason,
        x.outcome_batch_id,
        x.batch_id,
        x.tick_epoch
    from valid_events as e
    inner join entries as x
        on e.anchor_id = x.anchor_id
        and e.event_time between x.first_event_time and x.last_event_time
)

select * from final
