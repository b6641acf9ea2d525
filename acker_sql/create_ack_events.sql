-- create_ack_events.sql
-- What: the input table, one row per acker message (Storm __ack_* streams or FsShelter messages).
-- Who runs it: `acker init` (pipelines.tables.create_tables).
-- Parameters: :table, the qualified table name; {{idempotency_window}}, how long Delta keeps
--             each ingested file's transaction id (a table property takes no parameter
--             marker).
-- The change data feed gives each row its commit's timestamp, the arrival the processing_time
-- clock needs; an append-only table's feed is read from its data files, so it costs no space.
-- Invariants: append-only; the acker never updates or deletes a row (acker maintain only
--             compacts files).
-- Columns are nullable on purpose: rows that break the contract (null anchor_id, unknown
-- event_type, ...) are quarantined by the pipeline instead of failing the writer.
create table if not exists identifier(:table) (
    anchor_id     bigint    comment 'the tuple tree''s root id; must be non-null and non-zero',
    event_type    string    comment 'init | ack | anchor | fail | reset',
    xor_value     bigint    comment 'value XORed into the checksum (init, ack, anchor); ignored for fail and reset',
    spout_task    int       comment 'init only: the spout task to notify',
    source_msg_id string    comment 'init only: the spout''s own message id, what a replayer re-emits',
    component     string    comment 'emitting spout or bolt, for analysts',
    event_time    timestamp comment 'when the producer emitted the message',
    event_id      string    comment 'optional producer-side id, kept for provenance'
)
using delta
comment 'batch acker input: one row per acker message'
tblproperties (
    'delta.setTransactionRetentionDuration' = {{idempotency_window}},
    'delta.enableChangeDataFeed' = 'true'
)
