-- create_stuck_trees_view.sql
-- What: the trees still pending, oldest first: how many ticks they have lived since their
--       epoch stamp (creation, or the last renewal under refresh = reset | activity), how many
--       events they have had and when the last one happened. A tree expires at the tick that
--       makes age_epochs equal to `buckets`.
-- Who runs it: `acker init` and every session start, with the acker schema as current schema.
-- Parameters: :view, the qualified view name.
-- Invariants: one row per pending tree (pending rows with outcome null); age_epochs >= 0.
create or replace view identifier(:view) (
    anchor_id        comment 'the tuple tree''s root id',
    age_epochs       comment 'current epoch minus the tree''s epoch stamp: ticks lived since its stamp',
    epoch            comment 'the tree''s epoch stamp',
    has_init         comment 'false while the init event has not arrived',
    fail_seen        comment 'a fail arrived before the init; the tree fails when the init comes',
    spout_task       comment 'spout task from the init event',
    source_msg_id    comment 'spout message id from the init event',
    checksum         comment 'XOR of the values applied so far; it is 0 only once every edge is acked',
    event_count      comment 'events applied (duplicates excluded)',
    first_event_time comment 'earliest event_time applied',
    last_event_time  comment 'latest event_time applied'
)
comment 'batch acker: pending tuple trees by age in epochs, oldest first'
as
with current_epoch as (
    select coalesce(max(epoch), 0) as epoch from ticks
),

live_trees as (
    select *
    from pending
    where outcome is null
),

final as (
    select
        t.anchor_id,
        c.epoch - t.epoch as age_epochs,
        t.epoch,
        t.has_init,
        t.failed as fail_seen,
        t.spout_task,
        t.source_msg_id,
        t.checksum,
        t.event_count,
        t.first_event_time,
        t.last_event_time
    from live_trees as t
    cross join current_epoch as c
)

select * from final
order by age_epochs desc, first_event_time, anchor_id
