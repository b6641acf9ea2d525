-- aggregate_epochs.sql
-- What: the third rule of the fold: each anchor's events per epoch, XORed with bit_xor, with
--       what applying them changes (init, fail, reset seen; the events applied, re-delivered
--       and received; the new keys; the init's spout task and message id), then the anchor's
--       epochs as one array in epoch order. Re-deliveries add nothing to the checksum or the
--       keys; fail and reset rows are each applied, as Storm 2.x's acker applies every one.
-- Who runs it: pipelines.engine.epoch_parts where the fold's rules run as SQL, reading
--              {marked_keys} (mark_redeliveries.sql).
-- Parameters: :multi_epoch, whether the events span several epochs.
-- Output: one row per anchor with events: `parts`, its epochs' partials sorted by epoch.
-- Edge cases: bit_xor of no rows is NULL, hence coalesce(.., 0).
with epoch_agg as (
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
        -- the latest init; of inits as late, the greatest message id, then spout task
        max_by(spout_task, struct(last_time, source_msg_id, spout_task)) filter (
            where event_type = 'init' and not seen_before
        ) as init_spout_task,
        max_by(source_msg_id, struct(last_time, source_msg_id, spout_task)) filter (
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
    from {marked_keys}
    group by anchor_id, event_epoch
)

-- each anchor's epochs in order (the struct sorts by its first field); a single epoch's batch
-- (:multi_epoch false) holds one epoch per anchor, whose row is its array as it stands: the
-- planner drops the other branch, and with it a second aggregation of the batch's trees
select anchor_id, array({{include epoch_part}}) as parts
from epoch_agg
where not :multi_epoch
union all
select anchor_id, array_sort(collect_list({{include epoch_part}})) as parts
from epoch_agg
where :multi_epoch
group by anchor_id
