-- read_current_epoch.sql
-- What: the current epoch (0 before the first tick) and the last committed micro-batch (-1 if none).
-- Who runs it: pipelines.engine, before every batch and tick.
-- Parameters: :ticks, :batches (tables).
select
    (select coalesce(max(epoch), 0) from identifier(:ticks)) as epoch,
    (select coalesce(max(batch_id), -1) from identifier(:batches)) as last_batch_id
