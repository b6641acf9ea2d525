-- create_outcome_summary_view.sql
-- What: the analyst's first table: per hour, spout task and spout component, the trees
--       completed, failed, expired and overflowed, and the late and duplicate events. Everything
--       is counted against the spout that rooted the tree (its init event); the hour is that of
--       the tree's init (or first event, for trees whose init never came), and of the event
--       itself for late and duplicate events.
--       Duplicate events are repeats of an init, ack or anchor event the tree already had
--       (same type and value), less those that came after the tree resolved, which
--       late_events holds: what the acker drops and counts in batches.duplicates. A repeated
--       fail or reset is not a duplicate: the acker applies every one.
-- Who runs it: `acker init` and every session start, with the acker schema as current schema.
-- Parameters: :view, the qualified view name.
-- Invariants: one row per (hour, spout_task, component); overflowed <= failed; summed over all
--             rows, completed + failed + expired equals the rows of `outcomes` and late_events
--             equals the rows of the late_events table.
create or replace view identifier(:view) (
    hour             comment 'hour (UTC) of the tree''s init, or of the event for late and duplicate events',
    spout_task       comment 'spout task that rooted the trees (null for trees whose init never came)',
    component        comment 'spout component, from the tree''s init event',
    completed        comment 'trees completed',
    failed           comment 'trees failed, overflowed ones included',
    expired          comment 'trees expired (timeout or no_init)',
    overflowed       comment 'trees failed by the capacity guard (reason overflow)',
    late_events      comment 'events that arrived after their tree resolved',
    duplicate_events comment 'repeated events of a tree, dropped by the acker'
)
comment 'batch acker: trees and event anomalies per hour, spout task and component'
as
with tree_spouts as (
    select
        anchor_id,
        max_by(spout_task, event_time) as spout_task,
        max_by(component, event_time) as component
    from ack_events
    where event_type = 'init' and {{include input_contract}} is null
    group by anchor_id
),

event_copies as (
    select
        anchor_id,
        event_type,
        xor_value,
        min(event_time) as first_time,
        count(*) as copies
    from ack_events
    where event_type in ('init', 'ack', 'anchor') and {{include input_contract}} is null
    group by all
),

late_copies as (
    select
        anchor_id,
        event_type,
        xor_value,
        count(*) as copies
    from late_events
    group by anchor_id, event_type, xor_value
),

tree_counts as (
    select
        date_trunc('hour', coalesce(o.init_time, o.first_event_time)) as hour,
        o.spout_task,
        s.component,
        count_if(o.outcome = 'completed') as completed,
        count_if(o.outcome = 'failed') as failed,
        count_if(o.outcome = 'expired') as expired,
        count_if(o.reason = 'overflow') as overflowed,
        0 as late_events,
        0 as duplicate_events
    from outcomes as o
    left join tree_spouts as s on o.anchor_id = s.anchor_id
    group by all
),

late_counts as (
    select
        date_trunc('hour', l.event_time) as hour,
        s.spout_task,
        s.component,
        0 as completed,
        0 as failed,
        0 as expired,
        0 as overflowed,
        count(*) as late_events,
        0 as duplicate_events
    from late_events as l
    left join tree_spouts as s on l.anchor_id = s.anchor_id
    group by all
),

duplicate_counts as (
    select
        date_trunc('hour', c.first_time) as hour,
        s.spout_task,
        s.component,
        0 as completed,
        0 as failed,
        0 as expired,
        0 as overflowed,
        0 as late_events,
        sum(greatest(c.copies - 1 - coalesce(l.copies, 0), 0)) as duplicate_events
    from event_copies as c
    left join late_copies as l
        on c.anchor_id = l.anchor_id
        and c.event_type = l.event_type
        and c.xor_value <=> l.xor_value
    left join tree_spouts as s on c.anchor_id = s.anchor_id
    where c.copies > 1
    group by all
    having sum(greatest(c.copies - 1 - coalesce(l.copies, 0), 0)) > 0
),

final as (
    select
        hour,
        spout_task,
        component,
        sum(completed) as completed,
        sum(failed) as failed,
        sum(expired) as expired,
        sum(overflowed) as overflowed,
        sum(late_events) as late_events,
        sum(duplicate_events) as duplicate_events
    from (
        select * from tree_counts
        union all
        select * from late_counts
        union all
        select * from duplicate_counts
    )
    group by hour, spout_task, component
)

select * from final
order by hour, spout_task, component
