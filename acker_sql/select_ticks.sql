-- select_ticks.sql
-- What: the ticks table's rows for a run of ticks, one per epoch from :first_epoch to :target,
--       with the trees each expired, counted from {expired_rows} (and the entries whose
--       events it sent to late_events instead, from {late_rows}).
-- Who runs it: pipelines.engine.tick, after the expired rows are written. A run of ticks that
--              finishes one a crash interrupted passes the expired and late_events tables, so
--              that it counts the rows its first attempt wrote; any other passes the rows it
--              wrote itself, and reads no table.
-- Parameters: {expired_rows} (epoch, reason) and {late_rows} (tick_epoch, anchor_id);
--             :first_epoch; :target; :clock; :last_batch_id; :origin_us and
--             :interval_us, the clock's time grid (microseconds since 1970): each tick is
--             dated at the start of its epoch, so a clock anchored at its latest tick keeps
--             its grid; both null for a tick dated now (acker tick).
with epochs as (
    select explode(sequence(cast(:first_epoch as bigint), cast(:target as bigint))) as epoch
),

expiries as (
    select
        epoch,
        count_if(reason = 'timeout') as expired_timeout,
        count_if(reason = 'no_init') as expired_no_init
    from {expired_rows}
    where epoch between :first_epoch and :target
    group by epoch
),

late_entries as (
    select tick_epoch as epoch, count(distinct anchor_id) as late_no_init
    from {late_rows}
    where tick_epoch between :first_epoch and :target
    group by tick_epoch
),

final as (
    select
        e.epoch,
        coalesce(
            timestamp_micros(:origin_us + e.epoch * :interval_us), current_timestamp()
        ) as ticked_at,
        cast(:clock as string) as clock,
        coalesce(x.expired_timeout, 0) as expired_timeout,
        coalesce(x.expired_no_init, 0) as expired_no_init,
        cast(:last_batch_id as bigint) as last_batch_id,
        coalesce(l.late_no_init, 0) as late_no_init
    from epochs as e
    left join expiries as x on e.epoch = x.epoch
    left join late_entries as l on e.epoch = l.epoch
)

select * from final
order by epoch
