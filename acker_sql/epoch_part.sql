-- epoch_part.sql
-- What: one epoch's partial of an anchor, as aggregate_epochs.sql's `parts` hold them (the
--       struct sorts by its first field, the epoch).
-- Who runs it: no one alone; aggregate_epochs.sql includes it by name (pipelines.sql.load_sql).
-- Parameters: none.
struct(
    event_epoch as epoch, xor_delta, saw_init, saw_fail, saw_reset, applied, rows_in,
    duplicates, other_key, init_spout_task, init_source_msg_id, init_time, first_time,
    last_time, new_keys
)
