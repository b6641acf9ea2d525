-- read_position.sql
-- What: where the acker stands: the current epoch (0 before the first tick), the last
--       committed micro-batch (-1 if none), a `started` row an older acker left for a batch it
--       did not commit (null if none) and the newest epoch with expired rows or late events a
--       tick wrote (beyond the current epoch: a tick that was interrupted before it committed).
--       A batch begun but not committed is found from the rows it wrote
--       (find_unfinished_batch.sql).
-- Who runs it: pipelines.engine.read_position, before a run, batch or tick, through
--     pipelines.sql.run_sql_figures; not when the tables it reads are where the writer's own
--     last write left them (the writer keeps that position).
-- Why several statements: each reads one small table, and most of its time is planning and
--     scheduling, not reading; statements run side by side in threads overlap that.
-- Parameters: :ticks, :batches, :expired, :late_events (tables).
select coalesce(max(epoch), 0) as epoch from identifier(:ticks);

-- one scan of the batch log for both
select
    coalesce(max(batch_id) filter (where status = 'committed'), -1) as last_batch_id,
    max(batch_id) filter (where status = 'started') as started_batch_id
from identifier(:batches);

select max(epoch) as last_expired_epoch from identifier(:expired);

select max(tick_epoch) as last_late_tick_epoch from identifier(:late_events);
