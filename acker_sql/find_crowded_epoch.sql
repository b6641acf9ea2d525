-- find_crowded_epoch.sql
-- What: the first epoch of a pass at whose end more than :max_pending trees would be pending,
--       where the capacity guard of that epoch's micro-batch would fail new trees; null if
--       there is none, and the pass gives what applying its epochs one by one gives.
--       Pending at the end of epoch k is what was pending before the pass, plus the new trees
--       that entered by k, minus the trees that resolved by k or expired at a tick up to k.
--       Pending trees the pass does not touch are counted throughout, though some may expire
--       within it: the count may be high, never low.
-- Who runs it: pipelines.engine.plan_batch, for a pass over several epochs.
-- Reads: the DataFrame {batch_state} (fold_epochs.sql's output).
-- Parameters: :pending_before, trees pending before the pass; :max_pending; :buckets;
--             :through, the pass's last epoch.
with changes as (
    -- a new tree enters in the epoch of its first events
    select first_epoch as epoch, 1 as change
    from {batch_state}
    where action = 'upsert' and is_new

    union all

    -- a tree leaves in the epoch that resolves it, or at the tick its stamp expires it at
    select
        case
            when late_outcome in ('completed', 'failed') then last_epoch
            else epoch + :buckets
        end as epoch,
        -1 as change
    from {batch_state}
    where action = 'upsert' and (late_outcome is not null or epoch + :buckets <= :through)
),

per_epoch as (
    select epoch, sum(change) as change, max(change) > 0 as admits
    from changes
    group by epoch
),

running as (
    select
        epoch,
        admits,
        :pending_before + sum(change) over (order by epoch) as pending_at_end
    from per_epoch
)

select min(epoch) as crowded_epoch
from running
where admits and pending_at_end > :max_pending
