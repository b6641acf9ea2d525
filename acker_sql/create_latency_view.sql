-- create_latency_view.sql
-- What: how slow completed trees are, per spout task and hour of their init: approximate
--       percentiles (percentile_approx, exact below 10,000 trees per group) and the maximum of
--       latency_ms, the time from a tree's first to its last event.
-- Who runs it: `acker init` and every session start, with the acker schema as current schema.
-- Parameters: :view, the qualified view name.
-- Invariants: one row per (hour, spout_task); p50_ms <= p90_ms <= p99_ms <= max_ms.
create or replace view identifier(:view) (
    hour        comment 'hour of the trees'' init event_time (UTC)',
    spout_task  comment 'spout task that rooted the trees',
    trees       comment 'trees completed',
    p50_ms      comment 'median completion latency, milliseconds',
    p90_ms      comment '90th percentile completion latency, milliseconds',
    p99_ms      comment '99th percentile completion latency, milliseconds',
    max_ms      comment 'slowest completion, milliseconds'
)
comment 'batch acker: completion latency percentiles per spout task and hour'
as
with completed_trees as (
    select
        date_trunc('hour', init_time) as hour,
        spout_task,
        latency_ms
    from completed
),

final as (
    select
        hour,
        spout_task,
        count(*) as trees,
        percentile_approx(latency_ms, 0.5) as p50_ms,
        percentile_approx(latency_ms, 0.9) as p90_ms,
        percentile_approx(latency_ms, 0.99) as p99_ms,
        max(latency_ms) as max_ms
    from completed_trees
    group by hour, spout_task
)

select * from final
order by hour, spout_task
