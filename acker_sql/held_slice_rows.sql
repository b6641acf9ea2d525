-- held_slice_rows.sql
-- What: which rows of held_events belong to a slice: staged by stream batch :stream_batch_id or
--       earlier, and with a time in epoch :epoch or before (the arrival under processing_time,
--       else the event time), or marked for quarantine by the stager; a condition over a
--       held_events row. select_held_slice.sql reads these rows and delete_held_slice.sql
--       removes them, so both name the same rows.
-- Who runs it: no one alone; a statement includes it by name (pipelines.sql.load_sql).
-- Parameters: :stream_batch_id; :epoch; :origin_us and :interval_us (see held_epoch.sql).
stream_batch_id <= :stream_batch_id
and (
    quarantine_reason is not null
    or coalesce({{include held_epoch}}, :epoch) <= :epoch
)
