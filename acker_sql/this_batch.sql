-- this_batch.sql
-- What: the micro-batch's id and the time it writes its rows, as a one-row table.
-- Who runs it: pipelines.engine.plan_batch, once per batch; the batch's statements that need
--              either value read it as {this_batch}.
-- Parameters: :batch_id.
-- Why a table, not a parameter of each statement: Spark writes a constant into the Java code
--     it generates for a query, so a statement given a new batch id compiled anew in every
--     batch (16 classes of a 10^4-event batch); a table's values reach that code as data. Spark
--     evaluates a VALUES list once, as the statement is analysed: every row the batch writes
--     carries the same time.
select *
from values (cast(:batch_id as bigint), current_timestamp()) as this_batch(batch_id, written_at)
