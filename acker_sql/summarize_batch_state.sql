-- summarize_batch_state.sql
-- What: the counts the batch log and the capacity guard need, in one pass over the new state.
-- Who runs it: pipelines.engine.plan_batch.
-- Parameters: none.
-- Note: new_trees counts every tree that enters pending, resolved in the batch or not: with
--       fewer, no epoch of a pass can end with more than max_pending pending.
--       pending_adjust corrects the table's current pending count to the count before this
--       batch when an earlier attempt of the same batch already wrote some rows.
select
    coalesce(sum(rows_in), 0) as rows_in,
    coalesce(sum(applied), 0) as applied,
    coalesce(sum(duplicates), 0) as duplicates,
    count_if(outcome = 'completed') as completed,
    count_if(outcome = 'failed') as failed,
    count_if(reason = 'overflow') as overflowed,
    count_if(action = 'upsert' and is_new and outcome is null) as pending_inserted,
    count_if(action = 'upsert' and is_new) as new_trees,
    count_if(action = 'upsert' and not is_new and outcome is not null) as pending_removed,
    coalesce(sum(pending_adjust), 0) as pending_adjust,
    count_if(in_table or outcome is null) as rows_to_merge,
    coalesce(sum(late_rows), 0) as late_in_pass
from {batch_state}
