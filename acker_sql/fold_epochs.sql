-- fold_epochs.sql
-- What: the last rule of the fold: each touched anchor's epochs folded, in order, into its
--       base state: its new state and outcome. A batch's events all belong to its own epoch,
--       except in a pass that applies several epochs at once (the clocks that follow time):
--       there each event carries its epoch, and the fold gives each tree what applying the
--       epochs one by one, with a tick between them, would: it completes or fails in the
--       epoch whose events resolve it, and stops applying events once a tick would have
--       expired it (the tick that follows the pass writes that expiry); the events it did not
--       apply are late.
-- Who runs it: pipelines.engine.fold_events, reading {epoch_parts} (aggregate_epochs.sql) and
--              {base_state} (select_base_state.sql).
-- Parameters: :batch_id; :epoch, the current epoch; :refresh, reset (reset and fail events
--             renew a tree's stamp, as Storm 2.x) | activity (every applied event does);
--             :protocol, storm (an init of 0 alone completes its tree: Storm 2.x sends it for a
--             spout tuple nobody subscribes to) | fsshelter (every Track carries 0, and only an
--             Ok that brings the checksum back to 0 completes the tree); :buckets, as
--             configured.
-- Output: one row per anchor to write, with `action`: upsert (new state, resolved or not),
--         drop (a row only an earlier attempt of this batch created) or purge (a tree resolved
--         by an earlier batch, whose row can go now that the batch is committed); for a tree
--         whose later events the fold did not apply, `late_from` (the first such epoch) and
--         the outcome they are late for, however much later they came: an anchor gets one
--         outcome; `first_epoch`, the epoch of its first applied events (the capacity guard of
--         a pass counts pending per epoch from it, find_crowded_epoch.sql).
-- Edge cases: nothing resolves without an init; fail wins over a zero checksum.
with combined as (
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
    from {epoch_parts} as a
    full outer join {base_state} as b on a.anchor_id = b.anchor_id
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
