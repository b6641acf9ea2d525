-- summarize_outcomes.sql
-- What: the analyst's headline numbers for `acker status`: completion latency (p50, p99), how
--       many trees wait in the replay queue, and the age of the oldest pending tree.
-- Who runs it: pipelines.jobs.status.
-- Parameters: :completed (table); :replay_queue, :stuck_trees (views).
-- Edge cases: with no completed or pending trees the latencies and the age are null.
select
    (select percentile_approx(latency_ms, 0.5) from identifier(:completed)) as latency_p50_ms,
    (select percentile_approx(latency_ms, 0.99) from identifier(:completed)) as latency_p99_ms,
    (select count(*) from identifier(:replay_queue)) as replay_queue,
    (select max(age_epochs) from identifier(:stuck_trees)) as oldest_pending_epochs
