-- read_position.sql
-- What: where the acker stands: the current epoch (0 before the first tick), the last
--       committed micro-batch (-1 if none), a `started` row an older acker left for a batch it
--       did not commit (null if none) and the newest epoch with expired rows or late events a
--       tick wrote (beyond the current epoch: a tick that was interrupted before it committed).
--       A batch begun but not committed is found from the rows it wrote
--       (find_unfinished_batch.sql).
-- Who runs it: pipelines.engine.read_position, through pipelines.sql.run_sql_figures: for
--     `acker status`, and for a run or tick that finds no run record saying where the tables
--     stand (pipelines.run_record); a run carries the position from step to step.
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
