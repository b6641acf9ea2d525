-- create_pending_history_view.sql
-- What: the size of the pending state over epochs, rebuilt from the batch log and the ticks:
--       per epoch, the trees admitted to pending and resolved by its micro-batches, the trees
--       its opening tick expired, and the pending trees at its end.
-- Who runs it: `acker init` and every session start, with the acker schema as current schema.
-- Parameters: :view, the qualified view name.
-- Invariants: one row per epoch from 0 to the current one; pending_at_end of the current epoch
--             equals the rows of stuck_trees once every batch has committed.
create or replace view identifier(:view) (
    epoch           comment 'the epoch (0 before the first tick)',
    batches         comment 'micro-batches committed during the epoch',
    admitted        comment 'trees that entered pending during the epoch',
    resolved        comment 'pending trees the epoch''s batches completed or failed',
    expired_timeout comment 'trees the tick that opened the epoch expired with reason timeout',
    expired_no_init comment 'trees the tick that opened the epoch expired with reason no_init',
    late_no_init    comment 'entries the tick that opened the epoch removed without an outcome: no init, and their anchor already had one (their events are in late_events)',
    pending_at_end  comment 'trees pending when the epoch ended (or now, for the current epoch)'
)
comment 'batch acker: pending state size per epoch'
as
with epochs as (
    select explode(sequence(0L, coalesce(max(epoch), 0L))) as epoch from ticks
),

batch_flows as (
    select
        epoch,
        count(*) as batches,
        sum(pending_inserted) as admitted,
        sum(pending_removed) as resolved
    from batches
    where status = 'committed'
    group by epoch
),

tick_flows as (
    select
        epoch,
        sum(expired_timeout) as expired_timeout,
        sum(expired_no_init) as expired_no_init,
        sum(coalesce(late_no_init, 0)) as late_no_init
    from ticks
    group by epoch
),

flows as (
    select
        e.epoch,
        coalesce(b.batches, 0) as batches,
        coalesce(b.admitted, 0) as admitted,
        coalesce(b.resolved, 0) as resolved,
        coalesce(t.expired_timeout, 0) as expired_timeout,
        coalesce(t.expired_no_init, 0) as expired_no_init,
        coalesce(t.late_no_init, 0) as late_no_init
    from epochs as e
    left join batch_flows as b on e.epoch = b.epoch
    left join tick_flows as t on e.epoch = t.epoch
),

final as (
    select
        *,
        sum(admitted - resolved - expired_timeout - expired_no_init - late_no_init) over (
            order by epoch rows between unbounded preceding and current row
        ) as pending_at_end
    from flows
)

select * from final
order by epoch
