-- create_replay_queue_view.sql
-- What: what a replaying spout must re-emit: failed and expired trees with the spout task and
--       the spout's message id, newest resolution first. A tree that expired with reason
--       no_init is listed only once its init has come (late, in late_events), with the spout
--       task and message id that init carried: until then no spout is known to wait for it.
-- Who runs it: `acker init` and every session start, with the acker schema as current schema.
-- Parameters: :view, the qualified view name.
-- Invariants: spout_task is never null; reason is fail, overflow, timeout, or no_init for a
--             tree whose init came after it expired.
create or replace view identifier(:view) (
    spout_task    comment 'spout task to notify',
    source_msg_id comment 'the spout''s message id, what it re-emits',
    anchor_id     comment 'the tuple tree''s root id',
    outcome       comment 'failed | expired',
    reason        comment 'fail | overflow (failed) | timeout | no_init (expired; no_init once a late init came)',
    init_time     comment 'event_time of the init event (for no_init: of the late init)',
    resolved_at   comment 'wall-clock time the outcome was written',
    batch_id      comment 'micro-batch that resolved it (for expired: the last batch before the tick)',
    epoch         comment 'epoch at resolution'
)
comment 'batch acker: failed and expired trees a spout should replay, newest first'
as
with unfinished_trees as (
    select spout_task, source_msg_id, anchor_id, outcome, reason, init_time, resolved_at,
        batch_id, epoch
    from outcomes
    where outcome in ('failed', 'expired') and reason <> 'no_init'
),

late_inits as (
    select
        anchor_id,
        max_by(spout_task, event_time) as spout_task,
        max_by(source_msg_id, event_time) as source_msg_id,
        min(event_time) as init_time
    from late_events
    where event_type = 'init'
    group by anchor_id
),

expired_before_init as (
    select i.spout_task, i.source_msg_id, o.anchor_id, o.outcome, o.reason, i.init_time,
        o.resolved_at, o.batch_id, o.epoch
    from outcomes as o
    inner join late_inits as i on o.anchor_id = i.anchor_id
    where o.outcome = 'expired' and o.reason = 'no_init'
),

final as (
    select * from unfinished_trees
    union all
    select * from expired_before_init
)

select * from final
order by resolved_at desc, epoch desc, batch_id desc, anchor_id
