-- summarize_status.sql
-- What: everything `acker status` prints, in one statement: where the acker stands (as
--       read_position.sql reads it), how many rows each table holds (pending: live trees only),
--       and the analyst's headline numbers: completion latency (p50, p99), how many trees wait
--       in the replay queue, and the age of the oldest pending tree.
-- Who runs it: pipelines.jobs.status.
-- Parameters: :ticks, :batches, :expired, :completed, :failed, :late_events, :quarantine,
--             :ack_events, :pending (tables); :replay_queue, :stuck_trees (views).
-- Edge cases: with no completed or pending trees the latencies and the age are null; plain
--             counts of a Delta table are answered from its log, without reading a file.
select
    (select coalesce(max(epoch), 0) from identifier(:ticks)) as epoch,
    batches.last_batch_id,
    batches.started_batch_id,
    (select max(epoch) from identifier(:expired)) as last_expired_epoch,
    (select count(*) from identifier(:pending) where outcome is null) as pending,
    (select count(*) from identifier(:completed)) as completed,
    (select count(*) from identifier(:failed)) as failed,
    (select count(*) from identifier(:expired)) as expired,
    (select count(*) from identifier(:late_events)) as late_events,
    (select count(*) from identifier(:quarantine)) as quarantined,
    (select count(*) from identifier(:ack_events)) as events,
    (select percentile_approx(latency_ms, 0.5) from identifier(:completed)) as latency_p50_ms,
    (select percentile_approx(latency_ms, 0.99) from identifier(:completed)) as latency_p99_ms,
    (select count(*) from identifier(:replay_queue)) as replay_queue,
    (select max(age_epochs) from identifier(:stuck_trees)) as oldest_pending_epochs
from (
    select
        coalesce(max(batch_id) filter (where status = 'committed'), -1) as last_batch_id,
        max(batch_id) filter (where status = 'started') as started_batch_id
    from identifier(:batches)
) as batches
