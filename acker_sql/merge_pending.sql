-- merge_pending.sql
-- What: writes the micro-batch's new state to pending, after the outcome rows are durable.
--       Every row written keeps its values before this batch in `prev` and the batch id, so
--       running the MERGE again (a crash before the batch committed, or a replay) changes
--       nothing. Resolved trees keep their row, marked with the outcome, until the next batch
--       purges it; trees that resolved within this batch without a row never get one.
-- Who runs it: pipelines.engine.commit_batch.
-- Parameters: :pending (table).
-- Why the source is filtered: a row of a tree new to pending that resolved within the batch
--     matches nothing and inserts nothing (engine.BATCH_SUMMARY's rows_to_merge leaves
--     it out too); most of a large batch's trees are such rows, and the MERGE shuffled each
--     of them three times beside pending (1.65 million of a 10^7-event batch's rows, of which
--     465,000 remain: its MERGE into 10^7 pending trees 14.6 s against 18.0 s).
merge into identifier(:pending) as t
using (select * from {batch_state} where in_table or outcome is null) as s
on t.anchor_id = s.anchor_id
when matched and s.action in ('purge', 'drop') then delete
when matched then update set
    checksum = s.checksum,
    has_init = s.has_init,
    failed = s.failed,
    spout_task = s.spout_task,
    source_msg_id = s.source_msg_id,
    init_time = s.init_time,
    first_event_time = s.first_event_time,
    last_event_time = s.last_event_time,
    event_count = s.event_count,
    epoch = s.epoch,
    applied_keys = s.applied_keys,
    batch_id = s.batch_id,
    outcome = s.outcome,
    prev = s.prev
when not matched and s.action = 'upsert' and s.outcome is null then insert (
    anchor_id, checksum, has_init, failed, spout_task, source_msg_id, init_time,
    first_event_time, last_event_time, event_count, epoch, applied_keys, batch_id, outcome, prev
) values (
    s.anchor_id, s.checksum, s.has_init, s.failed, s.spout_task, s.source_msg_id, s.init_time,
    s.first_event_time, s.last_event_time, s.event_count, s.epoch, s.applied_keys, s.batch_id,
    s.outcome, s.prev
)
