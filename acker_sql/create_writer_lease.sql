-- create_writer_lease.sql
-- What: the writer lease, one row: who may write the acker's tables now. A writer verb claims
--       it by rewriting its file if the token is still the one it read (a Delta transaction
--       of its JVM, or update_writer_lease.sql), and Delta's optimistic concurrency lets one
--       of two concurrent claims commit; `token` grows by one a claim
--       and is the fencing token the writer's commits carry (pipelines.lease).
-- Who runs it: `acker init`.
-- Parameters: :table.
-- Invariants: one row (seed_writer_lease.sql); every claim, renewal and release rewrites it
--             whole (no deletion vectors, so two of them always touch the same file).
create table if not exists identifier(:table) (
    token      bigint    comment 'fencing token: 0 before the first claim, then one more a claim',
    holder     string    comment 'who holds or last held it: pid, host, verb',
    host       string    comment 'the holder''s host name',
    pid        int       comment 'the holder''s process id on that host',
    claimed_at timestamp comment 'when the holder claimed it (UTC)',
    expires_at timestamp comment 'when it lapses unless renewed (UTC); null once released'
)
using delta
comment 'batch acker: the writer lease (one row)'
tblproperties ('delta.enableDeletionVectors' = 'false')
