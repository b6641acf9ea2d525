-- create_replay_queue_view.sql
-- What: what a replaying spout must re-emit: failed and expired trees with the spout task and
--       the spout's message id, newest resolution first. Trees that expired with reason
--       no_init are left out: their init never came, so no spout is waiting for them.
-- Who runs it: `acker init` and every session start, with the acker schema as current schema.
-- Parameters: :view, the qualified view name.
-- Invariants: spout_task is never null; reason is fail, overflow or timeout.
create or replace view identifier(:view) (
    spout_task    comment 'spout task to notify',
    source_msg_id comment 'the spout''s message id, what it re-emits',
    anchor_id     comment 'the tuple tree''s root id',
    outcome       comment 'failed | expired',
    reason        comment 'fail | overflow (failed) | timeout (expired)',
    init_time     comment 'event_time of the init event',
    resolved_at   comment 'wall-clock time the outcome was written',
    batch_id      comment 'micro-batch that resolved it (for expired: the last batch before the tick)',
    epoch         comment 'epoch at resolution'
)
comment 'batch acker: failed and expired trees a spout should replay, newest first'
as
with unfinished_trees as (
    select *
    from outcomes
    where outcome in ('failed', 'expired') and reason <> 'no_init'
),

final as (
    select
        spout_task,
        source_msg_id,
        anchor_id,
        outcome,
        reason,
        init_time,
        resolved_at,
        batch_id,
        epoch
    from unfinished_trees
)

select * from final
order by resolved_at desc, epoch desc, batch_id desc, anchor_id
