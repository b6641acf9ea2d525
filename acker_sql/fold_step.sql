-- fold_step.sql
-- What: one step of the fold: the state `s` of a tree after its epochs so far, and the part `p`
--       of its next epoch (aggregate_epochs.sql's struct) give its state after that epoch. An
--       epoch after the tree's outcome changes nothing; one at or after the tick that expires
--       it (stamped `stamp`, it expires at the tick to `stamp + buckets`) gives it the outcome
--       `expired` and applies nothing; else its events apply, renew its stamp, and may complete
--       or fail it. `parts_applied` counts the epochs applied, which come first.
-- Who runs it: no one alone; fold_epochs.sql includes it by name (pipelines.sql.load_sql),
--              in its lambda over several epochs and on the one epoch of most trees.
-- Parameters: :buckets, :refresh and :protocol, as fold_epochs.sql.
case
    when s.outcome is not null then s
    when s.stamp + :buckets <= p.epoch then named_struct(
        'checksum', s.checksum,
        'has_init', s.has_init,
        'failed', s.failed,
        'other_key', s.other_key,
        'stamp', s.stamp,
        'last_epoch', s.last_epoch,
        'outcome', 'expired',
        'parts_applied', s.parts_applied
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
            when (s.has_init or p.saw_init) and (s.failed or p.saw_fail) then 'failed'
            when (s.has_init or p.saw_init) and s.checksum ^ p.xor_delta = 0 and (
                :protocol = 'storm'
                -- under FsShelter a tree has balanced only once something besides its Track
                -- (an init of 0, the one key a Track leaves) was applied
                or s.other_key or p.other_key
            ) then 'completed'
        end,
        'parts_applied', s.parts_applied + 1
    )
end
