-- mark_redeliveries.sql
-- What: the second rule of the fold: collapses the micro-batch's valid, non-late events per
--       (anchor, type, value, epoch), and marks each such key `seen_before` where it is a
--       re-delivery: an init, ack or anchor key its tree already applied (in its base state,
--       or, in a pass over several epochs, in an earlier epoch of the pass).
-- Who runs it: pipelines.engine.epoch_parts where the fold's rules run as SQL, reading
--              {fold_input} (select_fold_events.sql) and {base_state} (select_base_state.sql);
--              pipelines/jvm/EpochParts.java is the same rule with aggregate_epochs.sql's.
-- Parameters: :large_tree_keys, the key count above which a tree's re-deliveries are found by
--             intersection; :large_trees, whether any touched row holds more keys than that;
--             :multi_epoch, whether the events span several epochs.
-- Output: one row per (anchor, type, value, epoch): its key, copies, first and last time,
--         the spout task and message id of its last copy (of copies as late, the one with the
--         greatest message id, then spout task), and `seen_before`.
-- Edge cases: fail and reset carry no value, so they are never re-deliveries (the next rule
--             applies each of their rows); an init value of 0 is a key like any other.
with event_keys as (
    select
        anchor_id,
        event_type,
        xor_value,
        event_epoch,
        xxhash64(event_type, xor_value) as event_key,
        count(*) as copies,
        min(event_time) as first_time,
        max(event_time) as last_time,
        -- the latest copy; among copies as late, the greatest message id, then spout task:
        -- both from the same copy, whichever order the copies arrive in
        max_by(spout_task, struct(event_time, source_msg_id, spout_task)) as spout_task,
        max_by(source_msg_id, struct(event_time, source_msg_id, spout_task)) as source_msg_id
    from {fold_input}
    group by anchor_id, event_type, xor_value, event_epoch
),

-- Across the epochs of a pass, a key's first epoch applies it and later ones re-deliver it
-- (a single epoch's batch plans no window: :multi_epoch is false). Taken before the join
-- below, the window reads the keys in the order their grouping sorted them, without a sort.
keys_by_first_epoch as (
    select
        *,
        min(event_epoch) over (partition by anchor_id, event_type, xor_value) as first_epoch
    from event_keys
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
    from {base_state}
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
    from {base_state} as b
    left join large_batch_keys as k on b.anchor_id = k.anchor_id
)

select
    k.anchor_id,
    k.event_type,
    k.xor_value,
    k.event_epoch,
    k.event_key,
    k.copies,
    k.first_time,
    k.last_time,
    k.spout_task,
    k.source_msg_id,
    k.event_type in ('init', 'ack', 'anchor') and (
        coalesce(array_contains(l.keys, k.event_key), false)
        or (:multi_epoch and k.first_epoch < k.event_epoch)
    ) as seen_before
from keys_by_first_epoch as k
left join lookup_keys as l on k.anchor_id = l.anchor_id
