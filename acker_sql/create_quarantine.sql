-- create_quarantine.sql
-- What: rows that break the input contract, kept whole with the reason; nothing is dropped.
-- Who runs it: `acker init`.
-- Parameters: :table.
create table if not exists identifier(:table) (
    raw            string    comment 'the row as JSON text, exactly as read',
    reason         string    comment 'null_anchor_id | zero_anchor_id | unknown_event_type | null_xor_value | zero_xor_value | init_without_spout_task | null_event_time',
    source         string    comment 'where the row came from: the ack_events table or a file path',
    source_row     bigint    comment 'line or row number in the source file, when known',
    batch_id       bigint    comment 'micro-batch that quarantined it',
    quarantined_at timestamp comment 'wall-clock time it was quarantined'
)
using delta
comment 'batch acker: quarantined input rows'
