-- create_outcomes_view.sql
-- What: the three outcome tables as one, with an `outcome` column.
-- Who runs it: `acker init` and every session start, with the acker schema as current schema.
-- Parameters: :view, the qualified view name.
-- Invariants: one row per resolution; anchor_id appears once: an anchor gets one outcome.
create or replace view identifier(:view) (
    outcome          comment 'completed | failed | expired: the table the row comes from',
    anchor_id        comment 'the tuple tree''s root id',
    spout_task       comment 'spout task to notify (null when the init never came)',
    source_msg_id    comment 'spout message id, what a replayer re-emits',
    reason           comment 'acked (completed) | fail | overflow (failed) | timeout | no_init (expired)',
    init_time        comment 'event_time of the init event',
    first_event_time comment 'earliest event_time applied to the tree',
    last_event_time  comment 'latest event_time applied to the tree',
    latency_ms       comment 'last_event_time - first_event_time, in milliseconds',
    event_count      comment 'events applied to the tree (duplicates excluded)',
    batch_id         comment 'micro-batch that resolved it (for expired: the last batch before the tick)',
    epoch            comment 'epoch at resolution',
    resolved_at      comment 'wall-clock time the outcome was written'
)
comment 'batch acker: every resolved tuple tree, completed, failed or expired'
as
with completed_trees as (
    select 'completed' as outcome, * from completed
),

failed_trees as (
    select 'failed' as outcome, * from failed
),

expired_trees as (
    select 'expired' as outcome, * from expired
),

final as (
    select * from completed_trees
    union all
    select * from failed_trees
    union all
    select * from expired_trees
)

select * from final
