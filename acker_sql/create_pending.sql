-- create_pending.sql
-- What: the live state, one row per tuple tree not yet resolved (the RotatingMap's contents).
-- Who runs it: `acker init`.
-- Parameters: :table.
-- Invariants: anchor_id unique; a row leaves when its tree completes, fails or expires.
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
    batch_id         bigint        comment 'micro-batch that last wrote this row'
)
using delta
comment 'batch acker live state: pending tuple trees'
