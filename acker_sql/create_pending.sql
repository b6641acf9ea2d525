-- create_pending.sql
-- What: the live state, one row per tuple tree not yet resolved (the RotatingMap's contents),
--       kept as Trident's opaque transactional state: the current values, the values before the
--       batch that last wrote the row (`prev`), and that batch's id. A batch whose id equals the
--       row's starts from `prev`, so a replayed batch yields what a single application would.
-- Who runs it: `acker init`.
-- Parameters: :table.
-- Invariants: anchor_id unique; a tree counts as pending only while `outcome` is null. A tree
--             resolved by a batch keeps its row (with `outcome` set) until the next batch or
--             tick, so that batch can still be replayed; then the row is removed.
--             No row is an entry opened for an anchor that already has an outcome, which an
--             older acker (forgetting outcomes after a window of epochs) could open: the
--             property batchacker.reborn_entries = 'none' says so, and a table without it is
--             an older acker's, whose ticks look for them (reborn_entries.sql).
create table if not exists identifier(:table) (
    anchor_id        bigint        comment 'the tuple tree''s root id (unique)',
    checksum         bigint        comment 'XOR of every applied init/ack/anchor value; 0 with has_init means complete',
    has_init         boolean       comment 'true once the init event has been applied',
    failed           boolean       comment 'true once a fail event has been applied',
    spout_task       int           comment 'spout task from the init event',
    source_msg_id    string        comment 'spout message id from the init event',
    init_time        timestamp     comment 'event_time of the init event',
    first_event_time timestamp     comment 'earliest event_time applied',
    last_event_time  timestamp     comment 'latest event_time applied',
    event_count      bigint        comment 'number of events applied (duplicates excluded)',
    epoch            bigint        comment 'epoch stamp: expires at the tick that makes the epoch epoch + buckets',
    applied_keys     array<bigint> comment 'xxhash64(event_type, xor_value) of applied checksum events, to drop re-deliveries',
    batch_id         bigint        comment 'micro-batch that last wrote this row',
    outcome          string        comment 'null while pending; completed | failed when batch_id resolved the tree (row removed by the next batch or tick)',
    prev             struct<
        checksum: bigint, has_init: boolean, failed: boolean, spout_task: int,
        source_msg_id: string, init_time: timestamp, first_event_time: timestamp,
        last_event_time: timestamp, event_count: bigint, epoch: bigint,
        applied_keys: array<bigint>
    >                              comment 'the row''s values before batch_id wrote it; null when batch_id created it'
)
using delta
comment 'batch acker live state: pending tuple trees (opaque transactional)'
tblproperties ('batchacker.reborn_entries' = 'none')
