-- summarize_status.sql
-- What: what `acker status` prints beside where the acker stands (read_position.sql, run in
--       a thread of its own beside these), in statements of one row each, which the caller
--       runs side by side: how many rows each table holds (pending: live trees only), and the
--       analyst's headline numbers: completion latency (p50, p99), how many trees wait in the
--       replay queue, and the age of the oldest pending tree.
-- Who runs it: pipelines.jobs.status, through pipelines.sql.run_sql_figures.
-- Why several statements: Spark plans a statement's scalar subqueries one after another, and a
--     cold JVM spends most of `acker status` planning them; statements planned in parallel
--     threads finish about 1.5 s sooner on 2 cores.
-- Parameters: :expired, :completed, :failed, :late_events, :quarantine,
--             :ack_events, :pending (tables); :replay_queue, :stuck_trees (views).
-- Edge cases: with no completed or pending trees the latencies and the age are null; plain
--             counts of a Delta table are answered from its log, without reading a file.
-- The views first: they read most, and the threads then fill in with the plain counts.
select count(*) as replay_queue from identifier(:replay_queue);

select max(age_epochs) as oldest_pending_epochs from identifier(:stuck_trees);

select count(*) as expired from identifier(:expired);

select count(*) as pending from identifier(:pending) where outcome is null;

select
    count(*) as completed,
    percentile_approx(latency_ms, 0.5) as latency_p50_ms,
    percentile_approx(latency_ms, 0.99) as latency_p99_ms
from identifier(:completed);

select count(*) as failed from identifier(:failed);

select count(*) as late_events from identifier(:late_events);

select count(*) as quarantined from identifier(:quarantine);

select count(*) as events from identifier(:ack_events)
