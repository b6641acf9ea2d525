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
--      one write. One join reads pending once, the batch's row winning where both have one:
--      a union of the untouched and the written rows read it twice (each read a Delta file
--      listing of its own) and wrote one file per shuffle partition for each half.
insert overwrite identifier(:pending)
select
    if(s.anchor_id is null, t.anchor_id, s.anchor_id) as anchor_id,
    if(s.anchor_id is null, t.checksum, s.checksum) as checksum,
    if(s.anchor_id is null, t.has_init, s.has_init) as has_init,
    if(s.anchor_id is null, t.failed, s.failed) as failed,
    if(s.anchor_id is null, t.spout_task, s.spout_task) as spout_task,
    if(s.anchor_id is null, t.source_msg_id, s.source_msg_id) as source_msg_id,
    if(s.anchor_id is null, t.init_time, s.init_time) as init_time,
    if(s.anchor_id is null, t.first_event_time, s.first_event_time) as first_event_time,
    if(s.anchor_id is null, t.last_event_time, s.last_event_time) as last_event_time,
    if(s.anchor_id is null, t.event_count, s.event_count) as event_count,
    if(s.anchor_id is null, t.epoch, s.epoch) as epoch,
    if(s.anchor_id is null, t.applied_keys, s.applied_keys) as applied_keys,
    if(s.anchor_id is null, t.batch_id, s.batch_id) as batch_id,
    if(s.anchor_id is null, t.outcome, s.outcome) as outcome,
    if(s.anchor_id is null, t.prev, s.prev) as prev
from identifier(:pending) as t
full outer join {batch_state} as s on t.anchor_id = s.anchor_id
where
    s.anchor_id is null
    or (t.anchor_id is not null and s.action not in ('purge', 'drop'))
    or (t.anchor_id is null and s.action = 'upsert' and s.outcome is null)
