-- aggregate_batch.sql
-- What: the heart of the acker. Collapses the micro-batch's valid, non-late events per
--       (anchor, type, value) to drop re-deliveries of init, ack and anchor rows, XORs them
--       per anchor and epoch with bit_xor, and folds each anchor's epochs, in order, into its
--       base state: its new state and outcome.
--       A batch's events all belong to its own epoch, except in a pass that applies several
--       epochs at once (the clocks that follow time): there each event carries its epoch,
--       and the fold gives each tree what applying the epochs one by one, with a tick between
--       them, would: it completes or fails in the epoch whose events resolve it, and stops
--       applying events once a tick would have expired it (the tick that follows the pass
--       writes that expiry); the events it did not apply are late.
--       The base state is the opaque transactional one: a pending row written by this same
--       batch id (an earlier, interrupted or replayed attempt) contributes its `prev` values,
--       any other pending row its current values. So applying a batch again, with the same or
--       different content, gives what one application would.
-- Who runs it: pipelines.engine.plan_batch.
-- Reads: the DataFrames {classified_events} (with `event_epoch`), {batch_tombstones} and
--        {touched_pending} (the rows of pending this batch touches, from select_touched_pending).
-- Parameters: :batch_id; :epoch, the current epoch; :refresh, reset (reset and fail events
--             renew a tree's stamp, as Storm 2.x) | activity (every applied event does);
--             :protocol, storm (an init of 0 alone completes its tree: Storm 2.x sends it for a
--             spout tuple nobody subscribes to) | fsshelter (every Track carries 0, and only an
--             Ok that brings the checksum back to 0 completes the tree); :large_tree_keys, the
--             key count above which a tree's re-deliveries are found by intersection;
--             :large_trees, whether any touched row holds more keys than that; :multi_epoch,
--             whether the events span several epochs; :buckets, as configured.
-- Output: one row per anchor to write, with `action`: upsert (new state, resolved or not),
--         drop (a row only an earlier attempt of this batch created) or purge (a tree resolved
--         by an earlier batch, whose row can go now that the batch is committed); for a tree
--         whose later events the fold did not apply, `late_from` (the first such epoch) and
--         the outcome they are late for, however much later they came: an anchor gets one
--         outcome; `first_epoch`, the epoch of its first applied events (the capacity guard of
--         a pass counts pending per epoch from it, find_crowded_epoch.sql).
-- Edge cases: bit_xor of no rows is NULL, hence coalesce(.., 0); an init value of 0 is valid;
--             nothing resolves without an init; fail wins over a zero checksum.
with valid_events as (
    select e.*
    from {classified_events} as e
    -- late for a tree resolved before the batch, however long before
    left anti join {batch_tombstones} as t on e.anchor_id = t.anchor_id
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
        event_epoch,
        xxhash64(event_type, xor_value) as event_key,
        count(*) as copies,
        min(event_time) as first_time,
        max(event_time) as last_time,
        max_by(spout_task, event_time) as spout_task,
        max_by(source_msg_id, event_time) as source_msg_id
    from valid_events
    group by anchor_id, event_type, xor_value, event_epoch
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
    from {touched_pending}
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

-- Across the epochs of a pass, a key's first epoch applies it and later ones re-deliver it
-- (a single epoch's batch plans no window: :multi_epoch is false).
marked_keys as (
    select
        k.*,
        k.event_type in ('init', 'ack', 'anchor') and (
            coalesce(array_contains(l.keys, k.event_key), false)
            or (
                :multi_epoch and min(k.event_epoch) over (
                    partition by k.anchor_id, k.event_type, k.xor_value
                ) < k.event_epoch
            )
        ) as seen_before
    from event_keys as k
    left join lookup_keys as l on k.anchor_id = l.anchor_id
),

epoch_agg as (
    select
        anchor_id,
        event_epoch,
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
        ) as new_keys,
        coalesce(
            bool_or(
                event_type in ('init', 'ack', 'anchor') and not seen_before
                and event_key != xxhash64('init', cast(0 as bigint))
            ),
            false
        ) as other_key
    from marked_keys
    group by anchor_id, event_epoch
),

-- each anchor's epochs in order (the struct sorts by its first field)
batch_agg as (
    select
        anchor_id,
        array_sort(
            collect_list(
                struct(
                    event_epoch as epoch, xor_delta, saw_init, saw_fail, saw_reset, applied,
                    rows_in, duplicates, other_key, init_spout_task, init_source_msg_id,
                    init_time, first_time, last_time, new_keys
                )
            )
        ) as parts
    from epoch_agg
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
        -- under FsShelter, whether the tree holds a key besides its Track's (see folded)
        coalesce(
            :protocol = 'fsshelter'
            and exists(b.base.applied_keys, k -> k != xxhash64('init', cast(0 as bigint))),
            false
        ) as base_other_key,
        a.parts
    from batch_agg as a
    full outer join bases as b on a.anchor_id = b.anchor_id
),

-- The tree's epochs applied in order, as a tick between each would leave it: each epoch's
-- events, unless a tick before it expired the tree (stamped `stamp`, it expires at the tick
-- to `stamp + buckets`), and none after the epoch that completed or failed it.
folded as (
    select
        *,
        aggregate(
            coalesce(parts, array()),
            named_struct(
                'checksum', coalesce(base.checksum, cast(0 as bigint)),
                'has_init', coalesce(base.has_init, false),
                'failed', coalesce(base.failed, false),
                'other_key', base_other_key,
                'stamp', base.epoch,
                'last_epoch', cast(null as bigint),
                'outcome', cast(null as string)
            ),
            (s, p) -> case
                when s.outcome is not null then s
                when s.stamp + :buckets <= p.epoch then named_struct(
                    'checksum', s.checksum,
                    'has_init', s.has_init,
                    'failed', s.failed,
                    'other_key', s.other_key,
                    'stamp', s.stamp,
                    'last_epoch', s.last_epoch,
                    'outcome', 'expired'
                )
                else named_struct(
                    'checksum', s.checksum ^ p.xor_delta,
                    'has_init', s.has_init or p.saw_init,
                    'failed', s.failed or p.saw_fail,
                    'other_key', s.other_key or p.other_key,
                    'stamp', case
                        when s.stamp is null then p.epoch
                        when :refresh = 'activity' and p.applied > 0 then p.epoch
                        when p.saw_reset or p.saw_fail then p.epoch
                        else s.stamp
                    end,
                    'last_epoch', p.epoch,
                    'outcome', case
                        when (s.has_init or p.saw_init) and (s.failed or p.saw_fail)
                            then 'failed'
                        when (s.has_init or p.saw_init) and s.checksum ^ p.xor_delta = 0 and (
                            :protocol = 'storm'
                            -- under FsShelter a tree has balanced only once something besides
                            -- its Track (an init of 0, the one key a Track leaves) was applied
                            or s.other_key or p.other_key
                        ) then 'completed'
                    end
                )
            end
        ) as fold
    from combined
),

settled as (
    select
        *,
        case
            when resolved_earlier and not has_events then 'purge'
            when base is null and not has_events then 'drop'
            else 'upsert'
        end as action,
        -- the epoch of the outcome the fold reached: its tick for an expiry
        case
            when fold.outcome = 'expired' then fold.stamp + :buckets else fold.last_epoch
        end as outcome_epoch
    from folded
),

split as (
    select
        *,
        filter(coalesce(parts, array()), p -> p.epoch <= fold.last_epoch) as applied_parts,
        -- the epochs after the outcome, whose events are late
        filter(
            coalesce(parts, array()),
            p -> p.epoch > outcome_epoch or (fold.outcome = 'expired' and p.epoch = outcome_epoch)
        ) as late_parts
    from settled
),

final as (
    select
        anchor_id,
        action,
        fold.checksum,
        fold.has_init,
        fold.failed,
        coalesce(
            try_element_at(filter(applied_parts, p -> p.saw_init), -1).init_spout_task,
            base.spout_task
        ) as spout_task,
        coalesce(
            try_element_at(filter(applied_parts, p -> p.saw_init), -1).init_source_msg_id,
            base.source_msg_id
        ) as source_msg_id,
        least(base.init_time, array_min(transform(applied_parts, p -> p.init_time)))
            as init_time,
        least(base.first_event_time, array_min(transform(applied_parts, p -> p.first_time)))
            as first_event_time,
        greatest(base.last_event_time, array_max(transform(applied_parts, p -> p.last_time)))
            as last_event_time,
        coalesce(base.event_count, 0) + aggregate(
            applied_parts, cast(0 as bigint), (n, p) -> n + p.applied
        ) as event_count,
        coalesce(fold.stamp, :epoch) as epoch,
        -- each epoch's keys are new to the tree and sorted, so that the state does not depend
        -- on the order the plan met the events in
        array_union(
            coalesce(base.applied_keys, array()),
            flatten(transform(applied_parts, p -> p.new_keys))
        ) as applied_keys,
        cast(:batch_id as bigint) as batch_id,
        base as prev,
        base is null as is_new,
        in_table,
        pending_adjust,
        aggregate(applied_parts, cast(0 as bigint), (n, p) -> n + p.rows_in) as rows_in,
        aggregate(applied_parts, cast(0 as bigint), (n, p) -> n + p.applied) as applied,
        aggregate(applied_parts, cast(0 as bigint), (n, p) -> n + p.duplicates) as duplicates,
        case
            when action = 'upsert' and fold.outcome in ('completed', 'failed') then fold.outcome
        end as outcome,
        case
            when action != 'upsert' then null
            when fold.outcome = 'completed' then 'acked'
            when fold.outcome = 'failed' then 'fail'
        end as reason,
        fold.last_epoch,
        -- what the late events of a pass are late for
        fold.outcome as late_outcome,
        case fold.outcome
            when 'completed' then 'acked'
            when 'failed' then 'fail'
            when 'expired' then case when fold.has_init then 'timeout' else 'no_init' end
        end as late_reason,
        try_element_at(late_parts, 1).epoch as late_from,
        aggregate(late_parts, cast(0 as bigint), (n, p) -> n + p.rows_in) as late_rows,
        -- the epoch whose events first applied to the tree: when a new tree entered pending
        try_element_at(applied_parts, 1).epoch as first_epoch
    from split
)

select * from final
