-- find_unfinished_batch.sql
-- What: the micro-batch that began writing but did not commit (null if none): the newest batch
--       id after the last committed one that an output table or pending holds, one statement
--       per table. A batch writes its outputs, then MERGEs pending, then its `committed` row,
--       so a crash between its first write and the last leaves its id in one of these tables;
--       a crash before its first write leaves nothing, and the batch is simply applied anew.
-- Who runs it: pipelines.engine.read_position (with read_position.sql, and in `acker status`),
--     through pipelines.sql.run_sql_figures, which runs the statements side by side.
-- Parameters: :completed, :failed, :late_events, :quarantine, :pending (tables);
--             :last_batch_id, the last committed batch.
-- Why a literal bound: Delta skips every file whose batch_id statistics lie at or below it, so
--     these read only the files an unfinished batch wrote (none, most of the time).
select max(batch_id) as pending_batch_id from identifier(:pending) where batch_id > :last_batch_id;

select max(batch_id) as completed_batch_id
from identifier(:completed) where batch_id > :last_batch_id;

select max(batch_id) as failed_batch_id from identifier(:failed) where batch_id > :last_batch_id;

select max(batch_id) as late_batch_id
from identifier(:late_events) where batch_id > :last_batch_id;

select max(batch_id) as quarantine_batch_id
from identifier(:quarantine) where batch_id > :last_batch_id;
