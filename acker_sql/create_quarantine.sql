-- create_quarantine.sql
-- What: rows that break the input contract, kept whole with the reason; nothing is dropped.
-- Who runs it: `acker init`.
-- Parameters: :table; {{idempotency_window}}, how long Delta keeps each ingested
--             file's transaction id (a table property takes no parameter marker).
-- Invariants: reason is never null; batch_id is null exactly for rows acker ingest quarantined.
create table if not exists identifier(:table) (
    raw            string    comment 'the row as read: the file''s line (JSON Lines, CSV), the Parquet row or the ack_events row as JSON',
    reason         string    comment 'unparsable_row | invalid_<column> (ingest only) | null_anchor_id | zero_anchor_id | unknown_event_type | null_xor_value | zero_xor_value | init_without_spout_task | null_event_time | event_time_in_future | event_time_far_from_batch (event_time clock)',
    source         string    comment 'where the row came from: the input file''s path, or the ack_events table',
    source_row     bigint    comment 'line (JSON Lines, CSV) or row (Parquet) number in the input file; null for ack_events rows',
    batch_id       bigint    comment 'micro-batch that quarantined it; null for rows quarantined by acker ingest',
    quarantined_at timestamp comment 'wall-clock time it was quarantined'
)
using delta
comment 'batch acker: quarantined input rows'
tblproperties ('delta.setTransactionRetentionDuration' = {{idempotency_window}})
