-- create_tree_events_view.sql
-- What: every valid event of every tree in event-time order, with the tree's running checksum
--       after each event (a window bit_xor), for investigating one tree:
--       `select * from tree_events where anchor_id = ... order by event_seq`.
--       A re-delivered init/ack/anchor (same type and value as an earlier event of the tree)
--       is marked and left out of the checksum, as the acker drops it. Rows the acker
--       quarantines are left out. The checksum follows event time, as if every event had
--       arrived on time; events that came after the tree resolved are in late_events.
-- Who runs it: `acker init` and every session start, with the acker schema as current schema.
-- Parameters: :view, the qualified view name.
-- Invariants: event_seq runs 1, 2, ... per anchor_id; running_checksum is 0 after the last
--             event of a completed tree, unless an event came after it completed (late_events):
--             an FsShelter anchor delivered after the acks that closed the tree does that.
create or replace view identifier(:view) (
    anchor_id        comment 'the tuple tree''s root id',
    event_seq        comment 'position of the event in the tree, by event_time (init first on a tie)',
    event_time       comment 'when the producer emitted it',
    event_type       comment 'init | ack | anchor | fail | reset',
    xor_value        comment 'the value XORed into the checksum (null for fail and reset)',
    component        comment 'emitting spout or bolt',
    spout_task       comment 'init only: the spout task to notify',
    source_msg_id    comment 'init only: the spout''s message id',
    event_id         comment 'producer-side id',
    is_redelivery    comment 'true when an earlier event of the tree had the same type and value',
    running_checksum comment 'XOR of the tree''s init/ack/anchor values up to and including this event',
    outcome          comment 'how the tree resolved: completed | failed | expired; null while pending',
    outcome_reason   comment 'acked | fail | overflow | timeout | no_init; null while pending'
)
comment 'batch acker: the events of each tuple tree with its running checksum'
as
with valid_events as (
    select *
    from ack_events
    where {{include input_contract}} is null
),

sequenced_events as (
    select
        *,
        row_number() over (
            partition by anchor_id
            order by
                event_time,
                case event_type when 'init' then 0 when 'anchor' then 1 else 2 end,
                event_type,
                xor_value,
                event_id
        ) as event_seq,
        event_type in ('init', 'ack', 'anchor') and row_number() over (
            partition by anchor_id, event_type, xor_value
            order by event_time, event_id
        ) > 1 as is_redelivery
    from valid_events
),

checksummed_events as (
    select
        *,
        bit_xor(
            case
                when event_type in ('init', 'ack', 'anchor') and not is_redelivery then xor_value
                else 0
            end
        ) over (
            partition by anchor_id
            order by event_seq
            rows between unbounded preceding and current row
        ) as running_checksum
    from sequenced_events
),

resolutions as (
    select
        anchor_id,
        max_by(outcome, resolved_at) as outcome,
        max_by(reason, resolved_at) as outcome_reason
    from outcomes
    group by anchor_id
),

final as (
    select
        e.anchor_id,
        e.event_seq,
        e.event_time,
        e.event_type,
        case when e.event_type in ('fail', 'reset') then null else e.xor_value end as xor_value,
        e.component,
        e.spout_task,
        e.source_msg_id,
        e.event_id,
        e.is_redelivery,
        e.running_checksum,
        r.outcome,
        r.outcome_reason
    from checksummed_events as e
    left join resolutions as r on e.anchor_id = r.anchor_id
)

select * from final
