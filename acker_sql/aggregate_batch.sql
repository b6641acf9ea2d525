-- aggregate_batch.sql
-- What: the heart of the acker. Collapses the micro-batch's valid, non-late events per
--       (anchor, type, value) to drop re-deliveries of init, ack and anchor rows, XORs them
--       per anchor with bit_xor, and combines the result with the anchor's base state into
--       its new state and outcome.
--       The base state is the opaque transactional one: a pending row written by this same
--       batch id (an earlier, interrupted or replayed attempt) contributes its `prev` values,
--       any other pending row its current values. So applying a batch again, with the same or
--       different content, gives what one application would.
-- Who runs it: pipelines.engine.process_batch.
-- Reads: the temp views classified_events, batch_tombstones and touched_pending (the rows of
--        pending this batch touches, from select_touched_pending).
-- Parameters: :batch_id; :epoch, the current epoch; :refresh, reset (reset and fail events
--             renew a tree's stamp, as Storm 2.x) | activity (every applied event does);
--             :protocol, storm (an init of 0 alone completes its tree: Storm 2.x sends it for a
--             spout tuple nobody subscribes to) | fsshelter (every Track carries 0, and only an
--             Ok that brings the checksum back to 0 completes the tree); :large_tree_keys, the
--             key count above which a tree's re-deliveries are found by intersection;
--             :large_trees, whether any touched row holds more keys than that.
-- Output: one row per anchor to write, with `action`: upsert (new state, resolved or not),
--         drop (a row only an earlier attempt of this batch created) or purge (a tree resolved
--         by an earlier batch, whose row can go now that the batch is committed).
-- Edge cases: bit_xor of no rows is NULL, hence coalesce(.., 0); an init value of 0 is valid;
--             nothing resolves without an init; fail wins over a zero checksum.
with valid_events as (
    select e.*
    from classified_events as e
    left anti join batch_tombstones as t on e.anchor_id = t.anchor_id
    where e.quarantine_reason is null
    -- One shuffle by anchor serves both aggregations below: without it the events are
    -- shuffled per (anchor, type, value) and again per anchor (about 40% of the aggregate).
    distribute by e.anchor_id
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

bases as (
    select
        anchor_id,
        case
            when batch_id = :batch_id then prev
            when outcome is null then named_struct(
                'checksum', checksum,
                'has_init', has_init,
                'failed', failed,
                'spout_task', spout_task,
                'source_msg_id', source_msg_id,
                'init_time', init_time,
                'first_event_time', first_event_time,
                'last_event_time', last_event_time,
                'event_count', event_count,
                'epoch', epoch,
                'applied_keys', applied_keys
            )
        end as base,
        outcome is not null and batch_id < :batch_id as resolved_earlier,
        -- pending before this batch minus pending in the table now, for this row
        cast(batch_id = :batch_id and prev is not null as int)
        - cast(batch_id = :batch_id and outcome is null as int) as pending_adjust
    from touched_pending
),

-- A re-delivery is a key the tree already applied. Looking each key up in its tree's keys is
-- a scan per key: for a tree holding 10^5 keys, 10^5 new keys cost 10^10 comparisons (18 s a
-- batch). A tree holding more than :large_tree_keys keys instead intersects them, hashed, with
-- the batch's keys once, and its keys are looked up in the few that are re-delivered. Without
-- such a tree among the touched rows (:large_trees false) the planner drops that branch, and
-- the batch's keys are grouped once. The lookup arrays meet the
-- events in one join whose projection keeps only the answer: an array carried on each event
-- row past the join would be copied once per row.
large_trees as (
    select anchor_id
    from bases
    where :large_trees and size(base.applied_keys) > :large_tree_keys
),

large_batch_keys as (
    select
        k.anchor_id,
        collect_set(k.event_key) as event_keys
    from event_keys as k
    inner join large_trees as l on k.anchor_id = l.anchor_id
    group by k.anchor_id
),

lookup_keys as (
    select
        b.anchor_id,
        case
            when size(b.base.applied_keys) > :large_tree_keys
                then array_intersect(b.base.applied_keys, k.event_keys)
            else b.base.applied_keys
        end as keys
    from bases as b
    left join large_batch_keys as k on b.anchor_id = k.anchor_id
),

marked_keys as (
    select
        k.*,
        k.event_type in ('init', 'ack', 'anchor')
            and coalesce(array_contains(l.keys, k.event_key), false) as seen_before
    from event_keys as k
    left join lookup_keys as l on k.anchor_id = l.anchor_id
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
        -- fail and reset carry no value: each row is its own message, applied as Storm 2.x's
        -- acker applies every one (and renews the entry on each); only a repeated
        -- (type, value) of init, ack or anchor is a re-delivery
        sum(
            case
                when event_type in ('fail', 'reset') then copies
                when seen_before then 0
                else 1
            end
        ) as applied,
        sum(copies) as rows_in,
        sum(
            case
                when event_type in ('fail', 'reset') then 0
                when seen_before then copies
                else copies - 1
            end
        ) as duplicates,
        -- sorted, so that the state does not depend on the order the plan met the events in
        coalesce(
            array_sort(
                collect_set(event_key) filter (
                    where event_type in ('init', 'ack', 'anchor') and not seen_before
                )
            ),
            array()
        ) as new_keys
    from marked_keys
    group by anchor_id
),

combined as (
    select
        coalesce(a.anchor_id, b.anchor_id) as anchor_id,
        b.base,
        a.anchor_id is not null as has_events,
        b.anchor_id is not null as in_table,
        coalesce(b.resolved_earlier, false) as resolved_earlier,
        coalesce(b.pending_adjust, 0) as pending_adjust,
        coalesce(a.xor_delta, 0) as xor_delta,
        coalesce(a.saw_init, false) as saw_init,
        coalesce(a.saw_fail, false) as saw_fail,
        coalesce(a.saw_reset, false) as saw_reset,
        a.init_spout_task,
        a.init_source_msg_id,
        a.init_time,
        a.first_time,
        a.last_time,
        coalesce(a.applied, 0) as applied,
        coalesce(a.rows_in, 0) as rows_in,
        coalesce(a.duplicates, 0) as duplicates,
        coalesce(a.new_keys, array()) as new_keys
    from batch_agg as a
    full outer join bases as b on a.anchor_id = b.anchor_id
),

new_state as (
    select
        anchor_id,
        case
            when resolved_earlier then 'purge'
            when base is null and not has_events then 'drop'
            else 'upsert'
        end as action,
        coalesce(base.checksum, 0) ^ xor_delta as checksum,
        coalesce(base.has_init, false) or saw_init as has_init,
        coalesce(base.failed, false) or saw_fail as failed,
        coalesce(init_spout_task, base.spout_task) as spout_task,
        coalesce(init_source_msg_id, base.source_msg_id) as source_msg_id,
        least(base.init_time, init_time) as init_time,
        least(base.first_event_time, first_time) as first_event_time,
        greatest(base.last_event_time, last_time) as last_event_time,
        coalesce(base.event_count, 0) + applied as event_count,
        case
            when base is null then :epoch
            when :refresh = 'activity' and applied > 0 then :epoch
            when saw_reset or saw_fail then :epoch
            else base.epoch
        end as epoch,
        array_union(coalesce(base.applied_keys, array()), new_keys) as applied_keys,
        cast(:batch_id as bigint) as batch_id,
        base as prev,
        base is null as is_new,
        in_table,
        pending_adjust,
        rows_in,
        applied,
        duplicates
    from combined
),

balanced_state as (
    select
        *,
        checksum = 0 and (
            :protocol = 'storm'
            -- under FsShelter a tree has balanced only once something besides its Track (an
            -- init of 0, the one key a Track leaves) was applied
            or exists(applied_keys, k -> k != xxhash64('init', cast(0 as bigint)))
        ) as balanced
    from new_state
),

final as (
    select
        *,
        case
            when action != 'upsert' then null
            when has_init and failed then 'failed'
            when has_init and balanced then 'completed'
        end as outcome,
        case
            when action != 'upsert' then null
            when has_init and failed then 'fail'
            when has_init and balanced then 'acked'
        end as reason
    from balanced_state
)

select * except (balanced) from final
