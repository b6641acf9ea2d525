-- overwrite_pending.sql
-- What: writes the micro-batch's new state to pending as merge_pending.sql does, by rewriting
--       the whole table: its rows the batch does not touch, and the batch's rows as the MERGE
--       would leave them (matched rows updated unless purged or dropped, unmatched upserts of
--       unresolved trees inserted). Same rows, same guarantees on a second run.
-- Who runs it: pipelines.engine.commit_batch, in place of merge_pending.sql where pending
--              holds no more rows than the batch writes (a scheduled cycle's pending).
-- Parameters: :pending (table).
-- Why: a MERGE into a small table costs several Delta jobs (the touched files, the rows
--      written, the deletion vectors) and leaves a deletion vector per file that the ticks'
--      DELETE and every later read pay for; a table no larger than the batch is rewritten by
--      one write.
insert overwrite identifier(:pending)
select t.*
from identifier(:pending) as t
left anti join {batch_state} as s on t.anchor_id = s.anchor_id
union all
select
    s.anchor_id, s.checksum, s.has_init, s.failed, s.spout_task, s.source_msg_id, s.init_time,
    s.first_event_time, s.last_event_time, s.event_count, s.epoch, s.applied_keys, s.batch_id,
    s.outcome, s.prev
from {batch_state} as s
left join identifier(:pending) as t on t.anchor_id = s.anchor_id
where
    (t.anchor_id is not null and s.action not in ('purge', 'drop'))
    or (t.anchor_id is null and s.action = 'upsert' and s.outcome is null)
