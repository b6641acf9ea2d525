-- aggregate_batch.sql
-- What: the heart of the acker. Collapses the micro-batch's valid, non-late events per
--       (anchor, type, value) to drop re-deliveries, XORs them per anchor with bit_xor, and
--       combines the result with the anchor's pending row into its new state and outcome.
-- Who runs it: pipelines.engine.process_batch.
-- Parameters: :pending (table); :batch_id; :epoch, the current epoch; :refresh, reset | activity.
-- Edge cases: bit_xor of no rows is NULL, hence coalesce(.., 0); an init value of 0 is valid;
--             nothing resolves without an init; fail wins over a zero checksum.
with valid_events as (
    select e.*
    from classified_events as e
    left anti join batch_tombstones as t on e.anchor_id = t.anchor_id
    where e.quarantine_reason is null
),

event_keys as (
    select
        anchor_id,
        event_type,
        xor_value,
        xxhash64(event_type, xor_value) as event_key,
        count(*) as copies,
        min(event_time) as first_time,
        max(event_time) as last_time,
        max_by(spout_task, event_time) as spout_task,
        max_by(source_msg_id, event_time) as source_msg_id
    from valid_events
    group by anchor_id, event_type, xor_value
),

live as (
    select p.*
    from identifier(:pending) as p
    left semi join event_keys as k on p.anchor_id = k.anchor_id
),

marked_keys as (
    select
        k.*,
        k.event_type in ('init', 'ack', 'anchor')
            and coalesce(array_contains(l.applied_keys, k.event_key), false) as seen_before
    from event_keys as k
    left join live as l on k.anchor_id = l.anchor_id
),

batch_agg as (
    select
        anchor_id,
        coalesce(
            bit_xor(xor_value) filter (
                where event_type in ('init', 'ack', 'anchor') and not seen_before
            ),
            0
        ) as xor_delta,
        coalesce(bool_or(event_type = 'init' and not seen_before), false) as saw_init,
        max_by(spout_task, last_time) filter (
            where event_type = 'init' and not seen_before
        ) as init_spout_task,
        max_by(source_msg_id, last_time) filter (
            where event_type = 'init' and not seen_before
        ) as init_source_msg_id,
        min(first_time) filter (where event_type = 'init' and not seen_before) as init_time,
        bool_or(event_type = 'fail') as saw_fail,
        bool_or(event_type = 'reset') as saw_reset,
        min(first_time) filter (where not seen_before) as first_time,
        max(last_time) filter (where not seen_before) as last_time,
        count(*) filter (where not seen_before) as applied,
        sum(copies) as rows_in,
        sum(case when seen_before then copies else copies - 1 end) as duplicates,
        coalesce(
            collect_set(event_key) filter (
                where event_type in ('init', 'ack', 'anchor') and not seen_before
            ),
            array()
        ) as new_keys
    from marked_keys
    group by anchor_id
),

new_state as (
    select
        a.anchor_id,
        coalesce(l.checksum, 0) ^ a.xor_delta as checksum,
        coalesce(l.has_init, false) or a.saw_init as has_init,
        coalesce(l.failed, false) or a.saw_fail as failed,
        coalesce(a.init_spout_task, l.spout_task) as spout_task,
        coalesce(a.init_source_msg_id, l.source_msg_id) as source_msg_id,
        least(l.init_time, a.init_time) as init_time,
        least(l.first_event_time, a.first_time) as first_event_time,
        greatest(l.last_event_time, a.last_time) as last_event_time,
        coalesce(l.event_count, 0) + a.applied as event_count,
        case
            when l.anchor_id is null then :epoch
            when :refresh = 'activity' and a.applied > 0 then :epoch
            when a.saw_reset then :epoch
            else l.epoch
        end as epoch,
        array_union(coalesce(l.applied_keys, array()), a.new_keys) as applied_keys,
        cast(:batch_id as bigint) as batch_id,
        l.anchor_id is null as is_new,
        a.rows_in,
        a.applied,
        a.duplicates
    from batch_agg as a
    left join live as l on a.anchor_id = l.anchor_id
),

final as (
    select
        *,
        case
            when has_init and failed then 'failed'
            when has_init and checksum = 0 then 'completed'
        end as outcome,
        case
            when has_init and failed then 'fail'
            when has_init and checksum = 0 then 'acked'
        end as reason
    from new_state
)

select * from final
