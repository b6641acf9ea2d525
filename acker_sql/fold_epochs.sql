-- fold_epochs.sql
-- What: the last rule of the fold: each touched anchor's epochs folded, in order, into its
--       base state: its new state and outcome. A batch's events all belong to its own epoch,
--       except in a pass that applies several epochs at once (the clocks that follow time):
--       there each event carries its epoch, and the fold gives each tree what applying the
--       epochs one by one, with a tick between them, would: it completes or fails in the
--       epoch whose events resolve it, and stops applying events once a tick would have
--       expired it (the tick that follows the pass writes that expiry); the events it did not
--       apply are late.
-- Who runs it: pipelines.engine.fold_events, reading {epoch_parts} (aggregate_epochs.sql),
--              {base_state} (select_base_state.sql) and {this_batch}; each epoch is a step of
--              fold_step.sql.
-- Parameters: :epoch, the current epoch; :refresh, reset (reset and fail events
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
        coalesce(a.parts, array()) as parts,
        this.batch_id,
        -- when the batch writes the tree's outcome, if it has one
        this.written_at
    from {epoch_parts} as a
    full outer join {base_state} as b on a.anchor_id = b.anchor_id
    cross join {this_batch} as this
),

-- Where the tree stood before the batch: the state its epochs are folded into.
started as (
    select
        *,
        named_struct(
            'checksum', coalesce(base.checksum, cast(0 as bigint)),
            'has_init', coalesce(base.has_init, false),
            'failed', coalesce(base.failed, false),
            'other_key', base_other_key,
            'stamp', base.epoch,
            'last_epoch', cast(null as bigint),
            'outcome', cast(null as string),
            'parts_applied', 0
        ) as start
    from combined
),

-- The tree's epochs applied in order, as a tick between each would leave it: each epoch's
-- events, unless a tick before it expired the tree (stamped `stamp`, it expires at the tick
-- to `stamp + buckets`), and none after the epoch that completed or failed it, each epoch a
-- step (fold_step.sql). A tree of one epoch (most of them) takes its step on the columns `s`
-- and `p`, its start and its epoch, without a lambda, whose evaluation cost a fifth of the fold.
folded as (
    select
        *,
        case
            when size(parts) = 1 then {{include fold_step}}
            else aggregate(parts, start, (s, p) -> {{include fold_step}})
        end as fold
    from (select *, start as s, try_element_at(parts, 1) as p from started)
),

settled as (
    select
        *,
        case
            when resolved_earlier and not has_events then 'purge'
            when base is null and not has_events then 'drop'
            else 'upsert'
        end as action
    from folded
),

-- The epochs the fold applied come first, the ones after them are late: those after the
-- epoch that resolved the tree, or from the one whose tick expired it.
split as (
    select
        *,
        slice(parts, 1, fold.parts_applied) as applied_parts,
        slice(parts, fold.parts_applied + 1, size(parts) - fold.parts_applied) as late_parts
    from settled
),

-- The applied epochs as one, of a part's shape (so that a tree's single part, most trees',
-- is its own merge): the fields below that final does not read are there for that shape.
merged as (
    select
        *,
        case
            when size(applied_parts) <= 1 then try_element_at(applied_parts, 1)
            else aggregate(
                slice(applied_parts, 2, size(applied_parts) - 1),
                applied_parts[0],
                (m, p) -> named_struct(
                    'epoch', m.epoch,
                    'xor_delta', m.xor_delta ^ p.xor_delta,
                    'saw_init', m.saw_init or p.saw_init,
                    'saw_fail', m.saw_fail or p.saw_fail,
                    'saw_reset', m.saw_reset or p.saw_reset,
                    'applied', m.applied + p.applied,
                    'rows_in', m.rows_in + p.rows_in,
                    'duplicates', m.duplicates + p.duplicates,
                    'other_key', m.other_key or p.other_key,
                    -- the last init's
                    'init_spout_task', if(p.saw_init, p.init_spout_task, m.init_spout_task),
                    'init_source_msg_id',
                    if(p.saw_init, p.init_source_msg_id, m.init_source_msg_id),
                    'init_time', least(m.init_time, p.init_time),
                    'first_time', least(m.first_time, p.first_time),
                    'last_time', greatest(m.last_time, p.last_time),
                    'new_keys', concat(m.new_keys, p.new_keys)
                )
            )
        end as applied
    from split
),

final as (
    select
        anchor_id,
        action,
        fold.checksum,
        fold.has_init,
        fold.failed,
        coalesce(applied.init_spout_task, base.spout_task) as spout_task,
        coalesce(applied.init_source_msg_id, base.source_msg_id) as source_msg_id,
        least(base.init_time, applied.init_time) as init_time,
        least(base.first_event_time, applied.first_time) as first_event_time,
        greatest(base.last_event_time, applied.last_time) as last_event_time,
        coalesce(base.event_count, 0) + coalesce(applied.applied, 0) as event_count,
        coalesce(fold.stamp, :epoch) as epoch,
        -- each epoch's keys are new to the tree and sorted, so that the state does not depend
        -- on the order the plan met the events in
        array_union(coalesce(base.applied_keys, array()), coalesce(applied.new_keys, array()))
            as applied_keys,
        batch_id,
        written_at,
        base as prev,
        base is null as is_new,
        in_table,
        pending_adjust,
        coalesce(applied.rows_in, 0) as rows_in,
        coalesce(applied.applied, 0) as applied,
        coalesce(applied.duplicates, 0) as duplicates,
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
        case
            when size(late_parts) = 0 then cast(0 as bigint)
            else aggregate(late_parts, cast(0 as bigint), (n, p) -> n + p.rows_in)
        end as late_rows,
        -- the epoch whose events first applied to the tree: when a new tree entered pending
        try_element_at(applied_parts, 1).epoch as first_epoch
    from merged
)

select * from final
